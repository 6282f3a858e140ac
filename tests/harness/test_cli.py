"""``python -m harness check``: exit codes, progress, summary, report.json, subcommands, device faults."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
import torch

from harness import cli
from harness.execution import kernel_calls
from harness.properties.base import ERROR, FAIL, NOT_CLAIMED, PASS, REGISTRY, SKIPPED, PropertyResult
from harness.runner import (
    overall_exit_code,
    run_properties,
    select_properties,
    strict_exit_code,
    verdict_line,
)
from tests.harness.property_helpers import cpu_context

REF = "harness.adapters.reference_kernel:kernel"
FAST = ["structural", "coupled_exactness", "batch_invariance"]


def test_passing_kernel_exits_0_and_writes_the_report(tmp_path, capsys):
    code = cli.main(
        [
            "check",
            "--kernel",
            REF,
            "--profile",
            "ci",
            "--seed",
            "5",
            "--report",
            str(tmp_path),
            "--only",
            *FAST,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "[1/3] structural" in out and "PASS        structural" in out  # progress lines
    assert "family-wise false-alarm bound" in out and "verdict" in out  # summary table
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema"] == "specfuzz-report/1" and report["seed"] == 5 and report["kernel"] == REF
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the CLI's default device (GPU name after it)
    assert report["profile"] == "ci" and report["device"].startswith(device) and report["shard"] == "0/1"
    assert set(report["versions"]) >= {"python", "torch", "triton", "numpy", "hypothesis"}
    assert report["commit"] and report["family_wise_alpha"] == 0.0
    assert [p["name"] for p in report["properties"]] == FAST
    assert all(p["verdict"] == "pass" and p["cases"] > 0 for p in report["properties"])
    assert set(report["coverage"]) == {
        "vocab_size",
        "draft_len",
        "temperature_band",
        "family",
        "chunk_budget",
        "dtype",
        "method",
    }


def test_failing_kernel_exits_1_with_minimal_case_and_working_repro(tmp_path, capsys):
    spec = "tests.harness.sabotage:padding_zero"
    code = cli.main(
        ["check", "--kernel", spec, "--profile", "ci", "--report", str(tmp_path), "--only", "structural"]
    )
    assert code == 1
    failure = json.loads((tmp_path / "report.json").read_text())["properties"][0]["failures"][0]
    # shrunk to a small case: 16 is the top of the ci ladder's third rung (harness/generation/vocab_ladder.py)
    assert failure["class"] == "padding_not_minus_one" and failure["case"]["vocab_size"] <= 16
    argv = shlex.split(failure["repro"])
    assert argv[:4] == ["python", "-m", "harness", "check"]
    again = tmp_path / "again"
    assert cli.main(argv[3:] + ["--report", str(again), "--quiet"]) == 1
    assert (
        json.loads((again / "report.json").read_text())["properties"][0]["failures"][0]["case"]
        == failure["case"]
    )
    capsys.readouterr()


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--kernel", "no_such_module_abc:kernel"],
        ["check", "--kernel", REF, "--only", "no_such_property"],
        ["check", "--kernel", REF, "--device", "cuda"]
        if not __import__("torch").cuda.is_available()
        else ["check", "--bogus"],
        ["check", "--profile", "huge"],
        [],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    assert cli.main(argv) == 2
    capsys.readouterr()


def test_exit_code_rules():
    res = lambda v: PropertyResult("p", 1, v)
    assert overall_exit_code([res(PASS), res("not claimed")]) == 0
    assert overall_exit_code([res(PASS), res(FAIL), res(ERROR)]) == 1
    assert overall_exit_code([res(PASS), res(ERROR)]) == 2


def test_subcommands_come_from_modules_with_add_cli(monkeypatch):
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", ("tests.harness.cli_plugin_example", "harness.not_there"))
    assert cli.main(["hello", "--code", "3"]) == 3


def test_device_fault_continues_in_a_fresh_process(monkeypatch):
    # In this process the "device" dies at the first kernel error; the remaining properties must run
    # in a fresh process (where the kernel still fails, but as an ordinary kernel error).
    monkeypatch.setattr(kernel_calls, "HEALTH_CHECK", lambda device: False)
    ctx = cpu_context()
    ctx.kernel_spec = "tests.harness.sabotage:always_fails"
    from tests.harness.sabotage import always_fails

    lines = []
    results = run_properties(always_fails, ctx, select_properties(FAST), progress=lines.append)
    assert [r.name for r in results] == FAST
    assert results[0].verdict == FAIL and results[0].failures[0].cls == "device_fault"
    assert any("device fault" in line for line in lines)
    for r in results[1:]:
        assert "fresh process" in r.note and r.verdict == FAIL
        assert r.failures[0].cls == "kernel_raised"


def test_device_fault_without_subprocess_marks_the_rest_as_error(monkeypatch):
    monkeypatch.setattr(kernel_calls, "HEALTH_CHECK", lambda device: False)
    from tests.harness.sabotage import always_fails

    results = run_properties(always_fails, cpu_context(), select_properties(FAST), allow_subprocess=False)
    assert [r.verdict for r in results] == [FAIL, ERROR, ERROR]


def test_python_dash_m_entry_point():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "check",
            "--kernel",
            REF,
            "--only",
            "structural",
            "--profile",
            "ci",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "structural" in proc.stdout


def test_xdist_workers_are_pinned_round_robin_within_visible_gpus(monkeypatch):
    import types

    import conftest

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setenv("SPECFUZZ_PREWARM", "0")  # pinning only (tests/harness/test_prewarm.py)
    specs = [types.SimpleNamespace(env={}) for _ in range(3)]
    conftest.pytest_xdist_setupnodes(None, specs)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["3", "5", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    specs = [types.SimpleNamespace(env={})]
    conftest.pytest_xdist_setupnodes(None, specs)  # no GPU visible: workers left alone (CPU)
    assert specs[0].env == {}


def test_report_json_is_strict():
    import math

    import numpy as np

    from harness.reporting.report import json_safe

    safe = json_safe(
        {
            "a": [float("nan"), math.inf, -math.inf, np.float32(0.5), np.int64(3)],
            "b": (1, None),
            "c": np.array([1.0, np.nan]),
        }
    )
    assert safe == {"a": ["NaN", "Infinity", "-Infinity", 0.5, 3], "b": [1, None], "c": [1.0, "NaN"]}
    json.dumps(safe, allow_nan=False)


def test_sigterm_stops_the_run_but_keeps_what_ran(monkeypatch):
    """A property interrupted by SIGTERM is recorded as error, later ones are not run, earlier results
    stay (in-process: the property sends the signal to its own process)."""
    import os
    import signal
    import threading
    import time

    from harness.runner import interrupt_on_sigterm

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be set from the main thread")

    class Stub:
        def __init__(self, name, kill=False):
            self.name, self.layer, self.kill = name, 1, kill

        def run(self, kernel, ctx):
            if self.kill:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises before this returns
            return PropertyResult(self.name, 1, PASS, cases=1)

    before = signal.getsignal(signal.SIGTERM)
    with interrupt_on_sigterm():
        results = run_properties(None, cpu_context(), [Stub("a"), Stub("b", kill=True), Stub("c")])
    assert signal.getsignal(signal.SIGTERM) is before
    assert [(r.name, r.verdict) for r in results] == [("a", PASS), ("b", ERROR)]
    assert "interrupted" in results[1].note and "'c'" in results[1].note
    assert overall_exit_code(results) == 2


def test_sigterm_during_check_still_writes_the_report(tmp_path):
    """``timeout`` sends SIGTERM: the CLI prints the summary and writes report.json with the
    properties that finished (found on the H200: a killed GPU check lost a shrunk failure)."""
    import signal
    import threading

    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "check", "--kernel", REF, "--profile", "ci", "--seed", "5",
         "--report", str(tmp_path), "--only", *FAST],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(300, proc.kill)  # a hung child fails the test instead of hanging it
    watchdog.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("    PASS"):
                break
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        watchdog.cancel()
    text = "".join(lines) + out
    assert proc.returncode == 2, text  # the SIGTERM came after a pass: error, not failure
    report = json.loads((tmp_path / "report.json").read_text())
    verdicts = [(p["name"], p["verdict"]) for p in report["properties"]]
    assert verdicts == [("structural", "pass"), ("coupled_exactness", "error")], text


def test_sigterm_between_properties_marks_the_next_one(monkeypatch):
    """The signal may land outside a property's run (while printing progress): the first property
    without a result is marked, earlier results are kept."""
    from harness.runner import Interrupted

    class Stub:
        def __init__(self, name):
            self.name, self.layer = name, 1

        def run(self, kernel, ctx):
            return PropertyResult(self.name, 1, PASS, cases=1)

    def progress(line):
        if line.startswith("[2/3]"):
            raise Interrupted("signal 15")

    results = run_properties(None, cpu_context(), [Stub("a"), Stub("b"), Stub("c")], progress=progress)
    assert [(r.name, r.verdict) for r in results] == [("a", PASS), ("b", ERROR)]
    assert "'c'" in results[1].note


class _AlwaysSkipped:
    """A claimed property that never gets to run (as the statistics do on the CPU interpreter)."""

    name, layer = "always_skipped", 4

    def claimed(self, kernel):
        return True

    def run(self, kernel, ctx):
        return PropertyResult(self.name, self.layer, SKIPPED, note="not run: 10^9 samples would take ~1e6s")


def test_verdict_line_counts_what_ran_and_names_what_was_skipped():
    res = lambda name, v, note="": PropertyResult(name, 1, v, note=note)
    results = [res("a", PASS), res("b", SKIPPED, "not run: too slow here"), res("c", NOT_CLAIMED, "no"),
               res("d", FAIL)]
    line = verdict_line(results, overall_exit_code(results), False, 1.5, 7)
    assert line.startswith("FAIL: 2 of 4 properties ran (1 held, 1 failed, 0 errors)")
    assert "1 claimed but skipped: b (too slow here)" in line and "1 not claimed: c" in line
    assert line.endswith("in 1.5s (seed 7)")
    held = [res("a", PASS), res("b", SKIPPED, "x")]
    assert overall_exit_code(held) == 0 and strict_exit_code(held) == 1
    assert strict_exit_code([res("a", PASS), res("c", NOT_CLAIMED)]) == 0  # not claimed is not skipped
    assert strict_exit_code([res("a", ERROR), res("b", SKIPPED)]) == 2
    # nothing ran: never the word PASS (a user reading only the first word must not be told "PASS")
    none_ran = [res("b", SKIPPED, "not run: too slow here"), res("c", NOT_CLAIMED, "no")]
    lenient = verdict_line(none_ran, overall_exit_code(none_ran), False, 1.0, 7)
    assert lenient.startswith("NOTHING RAN: 0 of 2"), lenient
    assert verdict_line(none_ran, strict_exit_code(none_ran), True, 1.0, 7).startswith("FAIL: 0 of 2")


@pytest.mark.parametrize("strict", [False, True])
def test_strict_fails_a_run_with_a_skipped_claimed_property(strict, monkeypatch, capsys):
    monkeypatch.setitem(REGISTRY, "always_skipped", _AlwaysSkipped())
    argv = ["check", "--kernel", REF, "--profile", "ci", "--device", "cpu", "--only", "structural",
            "always_skipped"] + (["--strict"] if strict else [])
    code = cli.main(argv)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == (1 if strict else 0), last
    assert last.startswith("FAIL: " if strict else "PASS: ") and "1 of 2 properties ran" in last
    assert "always_skipped (10^9 samples would take ~1e6s)" in last
    assert ("a failure under --strict" in last) == strict
