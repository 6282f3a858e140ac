"""Faults cost one case, not the run (harness/execution/supervisor.py, harness/execution/worker.py,
harness/execution/transport.py).

The broken kernels that segfault, hard-exit (``os._exit(3)``) and hang on batches with ``V > 40`` and
at least 2 requests each end as a ``crash`` / ``hang`` finding with its (shrunk) case in ``check``,
``fuzz`` and ``pytest --kernel``, the run goes on with the next property, and the exit code is 1.
Seeds are fixed (``--seed 0``, printed by every command). To keep the suite fast, calls get a 1 s
time limit and the ci profile's shrink budget is cut to ``SHRINK_S`` seconds (each hanging try costs
the limit; a crashing one a fork of the worker, ~40 ms): in process for check and fuzz, through the
``tests.harness.fast_shrink`` plugin for the pytest subprocess.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from harness import cli
from harness.adapters.reference_kernel import ReferenceKernel
from harness.contract import VerifyOutput
from harness.execution import kernel_calls
from harness.execution.guard_bands import guarded_batch, guarded_outputs
from harness.execution.kernel_calls import KernelFault
from harness.execution.supervisor import STDERR_TAIL_CHARS, Worker, supervise
from harness.execution.transport import Packer, as_storage, changed_storages, snapshot, unpack, write_back
from harness.generation.cases import Case, build_batch
from harness.plugins import REFERENCE_KERNEL_SPEC
from harness.profiles import PROFILES
from harness.properties.base import RunContext
from harness.properties.case_property import HUNG_SHAPES_KEY, foreground_repro, hang_shape

REPO = Path(__file__).resolve().parents[2]
FAULTS = {  # name -> (class, evidence key and value)
    "segfault_on_large_batch": ("crash", "signal", "SIGSEGV"),
    "exits_on_large_batch": ("crash", "exit_status", 3),
    "hangs_on_large_batch": ("hang", "time_limit_s", 1.0),
}
LIMIT = ["--time-limit", "1"]
SHRINK_S = 3.0


@pytest.fixture
def fast_shrink(monkeypatch):
    monkeypatch.setitem(PROFILES, "ci", replace(PROFILES["ci"], shrink_seconds=SHRINK_S))


def _spec(name: str) -> str:
    return f"harness.broken.{name}:kernel"


def _common(name: str, report: Path) -> list[str]:
    """The arguments check and fuzz share here: kernel, profile, seed, device, report, time limit."""
    common = ["--kernel", _spec(name), "--profile", "ci", "--seed", "0", "--device", "cpu"]
    return [*common, "--report", str(report), *LIMIT]


def _assert_fault(failure: dict, name: str) -> None:
    cls, key, value = FAULTS[name]
    assert failure["class"] == cls and failure["first_field"] == "verify", failure["message"]
    assert failure["evidence"][key] == value, failure["evidence"]
    case = failure["case"]
    assert case["vocab_size"] > 40 and len(case["draft_lens"]) >= 2, case  # a case that does fault
    assert "--in-process" in failure["repro"]


# ----------------------------------------------------------------------------------------------------
# Transport and supervision on a healthy kernel
# ----------------------------------------------------------------------------------------------------
def test_transport_keeps_views_aliasing_and_writes():
    base = torch.arange(24, dtype=torch.float32)
    view, alias = base[4:16].view(3, 4), base[8:10]
    half = torch.randn(5, dtype=torch.bfloat16)
    packer = Packer()
    tree = packer.pack({"v": view, "a": alias, "h": (half, torch.empty(0)), "n": 7})
    assert len(packer.storages) == 3  # one per storage, not per tensor
    table = packer.table()
    far = [as_storage(data, device) for device, data in table]
    before = snapshot(far, table)
    got = unpack(tree, far)
    assert torch.equal(got["v"], view) and got["v"].stride() == view.stride() and got["n"] == 7
    assert got["v"].storage_offset() == 4 and torch.equal(got["h"][0], half)
    got["a"].fill_(-1.0)  # a write through one view shows in the other, and beyond the view
    assert got["v"][1, 0] == -1.0
    changed = changed_storages(before, far)
    assert changed == [0]
    write_back(packer.storages, {i: far[i].numpy().tobytes() for i in changed})
    assert base[8] == -1.0 and base[7] == 7.0


def test_supervised_reference_kernel_matches_in_process_and_keeps_guard_bands():
    kernel = ReferenceKernel()
    supervised = supervise(kernel, REFERENCE_KERNEL_SPEC, PROFILES["ci"])
    try:
        case = Case(vocab_size=50, draft_lens=[2, 3], temperatures=[1.0, 0.5], seeds=[1, 2], positions=[0, 4])
        batch, guards = guarded_batch(build_batch(case))
        out, want = supervised.verify(batch), kernel.verify(batch)
        assert torch.equal(out.output_token_ids, want.output_token_ids) and all(
            g.intact() for g in guards.values()
        )
        draws = zip(supervised.random_draws(batch), kernel.random_draws(batch), strict=True)
        assert all(torch.equal(a, b) for a, b in draws)
        target, out_guards = guarded_outputs(batch, False)
        supervised.verify_into(batch, target)  # caller buffers are written back into this process
        assert torch.equal(target.num_emitted, want.num_emitted) and all(
            g.intact() for g in out_guards.values()
        )
        with pytest.raises(ValueError, match="temperature") as raised:
            supervised.verify(replace(batch, temperature=torch.tensor([float("nan"), 1.0])))
        assert "worker.py" in raised.value.remote_traceback
        assert isinstance(out, VerifyOutput) and supervised.supervisor.faults == 0
    finally:
        supervised.close()


def test_the_stderr_tail_keeps_the_stack_dump_when_many_extension_modules_are_loaded(tmp_path):
    """faulthandler ends its dump with the loaded extension modules: over 3000 characters once scipy
    is loaded (as in any check), which pushed the stack, the evidence, out of the tail."""
    log = tmp_path / "worker.log"
    stack = 'Fatal Python error: Segmentation fault\n  File "/x/harness/broken/segfault_on_large_batch.py"\n'
    modules = "Extension modules: " + ", ".join(f"scipy.mod{i}" for i in range(400)) + " (total: 400)\n"
    log.write_text("earlier call's noise\n" + stack + "\n" + modules)
    fake = type("W", (), {"log_path": str(log), "log_size": lambda self: log.stat().st_size})()
    tail = Worker.log_tail(fake, since=len("earlier call's noise\n"))
    assert len(modules) > STDERR_TAIL_CHARS and "segfault_on_large_batch.py" in tail
    assert "Extension modules" not in tail and "noise" not in tail


class SimulatedDeviceFault(ReferenceKernel):
    """Raises a CUDA-like error on batches with 2+ requests and, in the worker only, makes the device
    probe fail: what an illegal address does on a GPU, on the CPU."""

    name = "simulated-device-fault"

    def verify(self, batch):
        if batch.num_reqs >= 2:
            kernel_calls.HEALTH_CHECK = lambda device: False
            raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")
        return super().verify(batch)


def test_a_device_fault_in_the_worker_is_a_crash_and_the_next_call_gets_a_fresh_worker():
    spec = "tests.harness.test_faults:SimulatedDeviceFault"
    supervised = supervise(SimulatedDeviceFault(), spec, PROFILES["ci"])
    one = build_batch(Case(vocab_size=8, draft_lens=[1], temperatures=[1.0], seeds=[3], positions=[0]))
    two = build_batch(
        Case(vocab_size=8, draft_lens=[1, 0], temperatures=[1.0, 1.0], seeds=[3, 4], positions=[0, 0])
    )
    try:
        supervised.verify(one)
        with pytest.raises(KernelFault) as fault:
            supervised.verify(two)
        assert fault.value.kind == "crash" and "illegal memory access" in fault.value.evidence["cuda_error"]
        assert "exit_status" not in fault.value.evidence and fault.value.batch is two
        assert torch.equal(supervised.verify(one).num_emitted, ReferenceKernel().verify(one).num_emitted)
        assert kernel_calls.HEALTH_CHECK is kernel_calls.device_healthy  # this process was never touched
        assert supervised.supervisor.faults == 1
    finally:
        supervised.close()


# ----------------------------------------------------------------------------------------------------
# Each fault kind, in check, fuzz and pytest --kernel
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_check_reports_the_fault_as_a_finding_and_goes_on(name, tmp_path, capsys, fast_shrink):
    argv = ["check", *_common(name, tmp_path), "--only", "structural", "logit_shift"]
    assert cli.main(argv) == 1  # the kernel failed: never its own exit code, never a dead harness
    props = json.loads((tmp_path / "report.json").read_text())["properties"]
    assert [p["name"] for p in props] == ["structural", "logit_shift"]
    assert props[0]["verdict"] == "fail" and props[1]["verdict"] in ("fail", "pass")  # the run went on
    _assert_fault(props[0]["failures"][0], name)
    if FAULTS[name][0] == "hang":  # paid once per shape: logit_shift never hangs on structural's shape
        shapes = [hang_shape(Case.from_dict(p["failures"][0]["case"])) for p in props if p["failures"]]
        assert len(shapes) == len(set(shapes)), shapes
    print(capsys.readouterr().out[-600:])


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fuzz_shrinks_saves_and_deduplicates_the_fault(name, tmp_path, fast_shrink):
    corpus = tmp_path / "corpus"
    argv = ["fuzz", *_common(name, tmp_path), "--budget", "120s", "--max-items", "2", "--only", "structural"]
    argv += ["--corpus", str(corpus), "--acceptance-requests", "0"]
    assert cli.main(argv) == 1
    report = json.loads((tmp_path / "report.json").read_text())
    (structural,) = [p for p in report["properties"] if p["name"] == "structural"]
    assert len(structural["failures"]) == 1  # two items, one deduplicated finding
    failure = structural["failures"][0]
    _assert_fault(failure, name)
    (saved,) = corpus.glob(f"structural-{FAULTS[name][0]}-verify-*.json")
    assert str(saved) in failure["repro"]
    page = (tmp_path / "report.html").read_text()
    assert f"&mdash; {FAULTS[name][0]} at" in page
    if failure["evidence"]["stderr_tail"]:  # os._exit leaves none; a signal or a hang leaves a stack dump
        assert "worker stderr (tail)" in page and f"{name}.py" in page


@pytest.mark.parametrize(
    "name",
    [
        "hangs_on_large_batch",
        *(
            pytest.param(n, marks=pytest.mark.slow)
            for n in ("exits_on_large_batch", "segfault_on_large_batch")
        ),
    ],
)
def test_pytest_kernel_fails_one_test_and_runs_the_next(name):
    """The session survives: both selected tests run and each fails with its own fault finding."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/harness/test_contract_properties.py",
            "-p",
            "no:randomly",
            "-p",
            "tests.harness.fast_shrink",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "-q",
            "-k",
            "structural or coupled_exactness",
            "--kernel",
            _spec(name),
            *LIMIT,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "2 failed" in out, out[-3000:]
    assert out.count(f"{FAULTS[name][0]} @ verify") >= 2 and "--in-process" in out, out[-3000:]


def test_the_foreground_repro_really_crashes_and_supervision_is_what_saves_the_run():
    """The repro of a crash runs the case in process and dies of the segfault (the fault is real, and a
    debugger would see it); the same replay supervised exits 1 with the finding."""
    case = Case(vocab_size=41, draft_lens=[0, 0], temperatures=[1.0, 1.0], seeds=[0, 0], positions=[0, 0])
    ctx = RunContext(PROFILES["ci"], torch.device("cpu"), 0, kernel_spec=_spec("segfault_on_large_batch"))
    argv = shlex.split(foreground_repro(ctx, "structural", case.to_dict()))
    assert argv[:4] == ["python", "-m", "harness", "replay"] and argv[-1] == "--in-process"
    repro = subprocess.run([sys.executable, *argv[1:]], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert repro.returncode == -signal.SIGSEGV, repro.stdout + repro.stderr
    supervised = subprocess.run(
        [sys.executable, *argv[1:-1]], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert supervised.returncode == 1 and "crash at verify" in supervised.stdout, supervised.stdout


class SlowFirstCall(ReferenceKernel):
    """Takes 2 s on every call with 2+ requests; with ``compiles`` it spends them inside Triton's
    cache-miss and post-compile hooks, as a first launch on a GPU does (the worker reports them)."""

    name = "slow-first-call"
    compiles = False

    def verify(self, batch):
        import time

        from triton import knobs

        if batch.num_reqs >= 2:
            if self.compiles:
                knobs.runtime.jit_cache_hook(key="k", repr="r", fn=None, compile=None, is_manual_warmup=False,
                                             already_compiled=False)
            time.sleep(2.0)
            if self.compiles:
                knobs.runtime.jit_post_compile_hook(key="k", repr="r", fn=None, compile=None,
                                                    is_manual_warmup=False, already_compiled=False)
        return super().verify(batch)


class CompilingFirstCall(SlowFirstCall):
    compiles = True


@pytest.mark.parametrize("compiles", [False, True])
def test_only_a_compiling_call_gets_the_compile_limit_not_the_first_call_as_such(compiles):
    """Issue 44: the run's first call got the 600 s compile allowance whether it compiled or not, so on
    the CPU (nothing compiles under the interpreter) a hang there cost 10 minutes. Now a call that
    does not compile is a hang at the call limit, first or not; one that compiles gets the compile
    limit for its compiles."""
    name = "CompilingFirstCall" if compiles else "SlowFirstCall"
    profile = replace(PROFILES["ci"], call_time_limit_s=1.0, compile_time_limit_s=30.0)
    supervised = supervise(ReferenceKernel(), f"tests.harness.test_faults:{name}", profile)
    two = build_batch(
        Case(vocab_size=8, draft_lens=[1, 0], temperatures=[1.0, 1.0], seeds=[3, 4], positions=[0, 0])
    )
    try:
        if compiles:
            assert supervised.verify(two).num_emitted.numel() == 2
        else:
            with pytest.raises(KernelFault) as fault:
                supervised.verify(two)  # the first call of the run
            assert fault.value.kind == "hang" and fault.value.evidence["time_limit_s"] == 1.0
            assert fault.value.evidence["compiles"] == 0
    finally:
        supervised.close()


def test_a_case_of_a_shape_that_hung_in_another_property_is_cut_without_a_call():
    """Issue 44: a kernel that hangs on large batches made every property pay the time limit again.
    A case whose shape hung in another property is now skipped (no kernel call); the property that
    found the hang still runs such cases (it shrinks them)."""
    from harness.properties import REGISTRY

    class MustNotBeCalled(ReferenceKernel):
        def verify(self, batch):
            raise AssertionError("called")

    case = Case(vocab_size=129, draft_lens=[1, 2], temperatures=[1.0, 1.0], seeds=[0, 2], positions=[0, 0])
    hung = {HUNG_SHAPES_KEY: {hang_shape(case): "structural"}}
    ctx = RunContext(PROFILES["ci"], torch.device("cpu"), 0, extra=hung)
    cut = REGISTRY["logit_shift"].check_guarded(MustNotBeCalled(), case, ctx)
    assert cut.skipped == "cut: a case of its shape hung in structural" and not cut.findings
    again = REGISTRY["structural"].check_guarded(MustNotBeCalled(), case, ctx)
    assert again.findings and again.findings[0].cls == "kernel_raised"  # its own hang's shape still runs
