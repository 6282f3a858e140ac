"""``check --budget`` (harness/timing/budget.py) and the in-property progress line
(harness/timing/progress.py).

The budget tests use a correct kernel that is slow on purpose (the oracle plus a sleep per call):
without a budget every property passes, with a small one the run must report the properties it cut
or never started as "skipped for budget", in the verdict line, report.json and the HTML page, and
``--strict`` must turn that into exit 1.
"""

from __future__ import annotations

import io
import json
import time

import pytest

from harness import cli
from harness.adapters.reference_kernel import ReferenceKernel
from harness.properties import REGISTRY, statistical
from harness.properties.base import PASS, SKIPPED
from harness.reporting.report_html import render_html
from harness.runner import run_properties, verdict_line
from harness.timing.budget import SKIPPED_FOR_BUDGET, Budget
from harness.timing.progress import Progress
from tests.harness.property_helpers import cpu_context

CALL_SECONDS = 0.1
PROPS = ["structural", "coupled_exactness"]


class SlowReference(ReferenceKernel):
    """The oracle, correct, taking ``CALL_SECONDS`` more per call."""

    def verify(self, batch):
        time.sleep(CALL_SECONDS)
        return super().verify(batch)


slow_kernel = SlowReference()


def _run(budget_s):
    ctx = cpu_context(seed=3)
    props = [REGISTRY[n] for n in PROPS]
    return run_properties(slow_kernel, ctx, props, budget=None if budget_s is None else Budget(budget_s))


def test_a_property_cut_by_the_budget_is_skipped_never_passed():
    cut = _run(2.0)  # 1 s each; structural alone makes >= 2 slow calls per case, 12 cases at least
    assert [r.verdict for r in cut] == [SKIPPED, SKIPPED], [(r.name, r.note) for r in cut]
    assert all(r.note.startswith(SKIPPED_FOR_BUDGET) for r in cut)
    assert cut[0].cases < 12 and f"{cut[0].cases} of 12 cases" in cut[0].note
    line = verdict_line(cut, 0, False, 1.0, 3)
    assert "0 of 2 properties ran" in line and f"2 {SKIPPED_FOR_BUDGET}: structural (" in line


def test_without_a_budget_the_same_properties_pass():
    """The control for the test above: the properties pass when nothing cuts them (so the skips
    come from the budget, not from the kernel)."""
    ctx = cpu_context(seed=3)
    results = run_properties(ReferenceKernel(), ctx, [REGISTRY[n] for n in PROPS])
    assert [r.verdict for r in results] == [PASS, PASS]


def test_properties_after_a_spent_budget_are_not_started():
    results = _run(1e-6)
    assert all(r.verdict == SKIPPED for r in results)
    assert "not started" in results[-1].note and results[-1].cases == 0


def test_check_budget_reports_skips_in_report_and_html_and_strict_fails(tmp_path, capsys):
    argv = ["check", "--kernel", "tests.harness.test_budget_progress:slow_kernel", "--profile", "ci",
            "--in-process", "--only", *PROPS, "--budget", "2s", "--report", str(tmp_path), "--quiet"]
    assert cli.main(argv) == 0  # skipped is not a failure ...
    assert cli.main([*argv, "--strict"]) == 1  # ... unless --strict
    out = capsys.readouterr().out
    assert f"2 {SKIPPED_FOR_BUDGET}" in out.splitlines()[-2]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["command"].endswith("--strict --budget 2s") and report["budget_s"] == 2.0
    assert report["skipped_for_budget"] == PROPS
    assert all(p["verdict"] == "skipped" for p in report["properties"])
    page = render_html(report)
    assert SKIPPED_FOR_BUDGET in page and "2 s" in page


def test_check_rejects_a_bad_budget(capsys):
    assert cli.main(["check", "--budget", "soon", "--only", "structural"]) == 2
    assert "duration" in capsys.readouterr().err


def test_a_statistical_property_stops_before_its_next_assertion(monkeypatch):
    ctx = cpu_context()
    ctx.extra["deadline"] = time.perf_counter() - 1.0
    suite = statistical._Suite(ctx, "conditional_law", 4)
    assert list(suite.each(range(4))) == [] and suite.cut
    res = statistical._result("conditional_law", time.perf_counter(), [], [], 0, suite=suite)
    assert res.verdict == SKIPPED and res.note.startswith(SKIPPED_FOR_BUDGET) and "0 of 4" in res.note
    # too slow for its share (not for the profile): skipped for budget, not "too slow"
    monkeypatch.setattr(statistical, "projected_seconds", lambda kernel, ctx, n: 5.0)
    ctx.extra["deadline"] = time.perf_counter() + 2.0
    skipped = statistical.sized_samples(None, ctx, "marginal_law", [1000], ["a"], time.perf_counter())
    assert skipped.verdict == SKIPPED and skipped.note.startswith(SKIPPED_FOR_BUDGET)
    del ctx.extra["deadline"]
    plan = statistical.sized_samples(None, ctx, "marginal_law", [1000], ["a"], time.perf_counter())
    assert plan.sizes == [1000] and not plan.note


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_line_shows_cases_elapsed_and_estimate_then_clears():
    clock = iter(float(t) for t in range(100))
    out = _Terminal()
    progress = Progress(stream=out, enabled=True, interval=0.0, clock=lambda: next(clock))
    progress.start("structural", 4)
    progress.advance(1)  # started at t=0, now t=2: 2 s per case, 3 left
    progress.advance(4)
    progress.finish()
    text = out.getvalue()
    assert "\r[structural] 1/4 cases, 2s, ~6s left" in text and "4/4 cases" in text
    assert text.endswith("\r") and "~" not in text.split("4/4")[1]


@pytest.mark.parametrize("tty,ci,expected", [(True, "", True), (True, "true", False), (False, "", False)])
def test_progress_only_on_a_terminal_outside_ci(monkeypatch, tty, ci, expected):
    monkeypatch.setenv("CI", ci)
    stream = _Terminal() if tty else io.StringIO()
    progress = Progress(stream=stream, interval=0.0)
    progress.start("x", 2)
    progress.advance(1)
    assert progress.enabled is expected and bool(stream.getvalue()) is expected


def test_case_properties_report_progress_per_case():
    out = _Terminal()
    ctx = cpu_context(seed=1, progress=Progress(stream=out, enabled=True, interval=0.0))
    REGISTRY["structural"].run(ReferenceKernel(), ctx)
    lines = [s for s in out.getvalue().split("\r") if s.strip()]
    assert lines[0].startswith("[structural] 1/") and len(lines) >= 12
