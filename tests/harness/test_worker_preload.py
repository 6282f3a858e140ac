"""The worker's preloading (harness/execution/worker.py ``Preloader``, ``Supervisor.preload``): what
``check`` uses to load Triton binaries while its worker waits for calls. On the CPU the loader is a
probe that notes when it ran; on a GPU it is harness/compiles/prewarm.py ``load_binary``."""

from __future__ import annotations

import json
import os
import tempfile
import time

import pytest
import torch

from harness.adapters.reference_kernel import ReferenceKernel
from harness.compiles.prewarm import load_binary
from harness.execution.supervisor import supervise
from harness.execution.worker import Preloader
from harness.generation.cases import Case, build_batch
from harness.plugins import REFERENCE_KERNEL_SPEC
from harness.profiles import PROFILES
from kernels import _device

PROBE = "tests.harness.test_worker_preload:probe_load"


def probe_load(record) -> None:
    """The loader the worker runs: note (pid, record, start, end) in the record's file."""
    path, name, seconds = record
    start = time.time()
    time.sleep(seconds)
    with open(path, "a") as f:
        f.write(json.dumps([os.getpid(), name, start, time.time()]) + "\n")


def _noted(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def _wait_for(path, count, seconds=20.0):
    deadline = time.monotonic() + seconds
    while len(_noted(path)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return _noted(path)


def test_the_worker_loads_in_order_between_calls_and_its_calls_stay_exact(tmp_path):
    path = str(tmp_path / "loads.jsonl")
    kernel = ReferenceKernel()
    supervised = supervise(kernel, REFERENCE_KERNEL_SPEC, PROFILES["ci"])
    try:
        batch = build_batch(Case(vocab_size=50, draft_lens=[2, 3], temperatures=[1.0, 0.5], seeds=[1, 2],
                                 positions=[0, 4]))
        supervised.supervisor.preload(PROBE, [(path, f"r{i}", 0.05) for i in range(6)])
        for _ in range(4):  # each call is answered exactly while the loads go on between them
            out = supervised.verify(batch)
            assert torch.equal(out.output_token_ids, kernel.verify(batch).output_token_ids)
        noted = _wait_for(path, 6)
        assert [n[1] for n in noted] == [f"r{i}" for i in range(6)], "loaded in the order given"
        assert {n[0] for n in noted} == {supervised.supervisor.worker_pid()}, "in the worker"
        supervised.supervisor.preload(PROBE, [(path, "later", 0.0)])
        supervised.verify(batch)  # given after the worker started: sent with the next call
        assert _wait_for(path, 7)[-1][1] == "later"
    finally:
        supervised.close()


def test_a_loader_that_cannot_be_imported_only_stops_the_preloading(tmp_path):
    preloader = Preloader()
    preloader.add("no_such_module_anywhere:load", [("x",)])
    with preloader.during_call():  # calls still run
        pass
    assert not preloader.queue


def test_a_record_that_takes_long_stops_the_preloading(tmp_path):
    """A record slower than SLOW_S is a compile, not a load: later records are left to their calls."""
    path = str(tmp_path / "loads.jsonl")
    preloader = Preloader()
    preloader.add(PROBE, [(path, "fast", 0.0), (path, "slow", Preloader.SLOW_S + 0.2), (path, "after", 0.0)])
    noted = _wait_for(path, 2)
    time.sleep(0.3)
    assert [n[1] for n in _noted(path)] == ["fast", "slow"] and preloader.stopped
    assert [n[1] for n in noted][:2] == ["fast", "slow"]


def test_a_call_waits_for_the_load_in_progress_then_the_loads_wait_for_it(tmp_path):
    path = str(tmp_path / "loads.jsonl")
    preloader = Preloader()
    preloader.add(PROBE, [(path, f"r{i}", 0.3) for i in range(3)])
    time.sleep(0.1)  # r0 is loading
    with preloader.during_call():
        entered = time.time()
        time.sleep(0.5)  # the call's work: no load may run now
        left = time.time()
    noted = _wait_for(path, 3)
    assert not any(entered < start < left for _, _, start, _ in noted)
    assert noted[0][3] <= entered + 0.05, "the call waited only for the load in progress"


PROBE_LOG = os.path.join(tempfile.gettempdir(), f"specfuzz-preload-probe-{os.getuid()}.jsonl")


def probe_binary_load(record) -> None:
    """``check``'s loader, noted: the record and the process that loads it."""
    load_binary(record)
    with open(PROBE_LOG, "a") as f:
        f.write(json.dumps([os.getpid(), record[0]]) + "\n")


@pytest.mark.skipif(not _device.INTERPRETING, reason=(
    "holds only under the interpreter, whose warm-up is a no-op: on an H100 the probe noted no load "
    "before the one-property check ended (2026-12-07; a load there compiles, a likely cause, not "
    "confirmed); on a GPU the preloading is measured by bench/gpu_verdict.sh check-warm: the "
    "worker's preloaded count)"))
def test_a_prewarmed_check_hands_its_recorded_keys_to_the_worker_in_order(monkeypatch, tmp_path, capsys):
    """``check`` on a prewarmed cache (a recorded run: harness/compiles/prewarm.py, 3): the run's
    keys go to its worker's loader at once, in the order of the manifest. On the CPU nothing
    compiles (the interpreter's warm-up is a no-op): the plumbing is what runs."""
    from harness import cli
    from harness.compiles import prewarm

    names = ["degenerate_rows_outcome"]
    store = prewarm.Manifests(tmp_path / "build")
    keys = prewarm.planned_keys("ci", 0, "cpu", jobs=0, names=names)
    order = sorted(keys, reverse=True)  # not the sorted order: the manifest's order is kept
    store.record(prewarm.Manifests.run_name("ci", 0, None, names, prewarm.OUR_KERNELS), order)
    monkeypatch.setattr(prewarm.Manifests, "for_this_build", staticmethod(lambda device="cuda": store))
    if os.path.exists(PROBE_LOG):
        os.unlink(PROBE_LOG)
    monkeypatch.setattr(prewarm, "LOAD_BINARY", "tests.harness.test_worker_preload:probe_binary_load")
    code = cli.main(["check", "--kernel", prewarm.OUR_KERNELS, "--profile", "ci", "--device", "cpu",
                     "--seed", "0", "--only", *names, "--prewarm"])
    said = "".join(capsys.readouterr())
    assert code == 0 and "compiled already" in said, said
    loaded = _noted(PROBE_LOG)
    assert loaded and [kernel for _, kernel in loaded] == [kernel for kernel, _ in order][: len(loaded)]
    assert len({pid for pid, _ in loaded}) == 1 and loaded[0][0] != os.getpid(), "loaded in the worker"
