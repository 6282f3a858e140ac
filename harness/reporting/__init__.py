"""Reports of a run: ``report`` (report.json and the console verdict) and ``report_html`` (the readable
HTML report with plots)."""
