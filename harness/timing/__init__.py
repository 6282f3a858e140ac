"""Where a run's time goes and how it is spent: ``budget`` (``check --budget``: shares of a wall-time
budget; what is not reached is ``skipped for budget``), ``progress`` (the status line inside a
property on a terminal), ``time_split`` (kernel / case building / oracle / other seconds, for
bench/check_breakdown.py)."""
