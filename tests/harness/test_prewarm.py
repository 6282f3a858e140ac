"""harness/compiles/prewarm.py on the CPU: the keys it plans are the keys a check launches, the arguments it
builds specialise as Triton specialises them, and the compile step runs (a no-op under the
interpreter; on a GPU the same calls compile)."""

from __future__ import annotations

import types

import pytest
import torch
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend

import conftest
from harness.compiles.keys import arg_class, specialisation_key
from harness.compiles.prewarm import (
    INT_FOR_CLASS,
    Pointer,
    compile_keys,
    jit_function,
    planned_keys,
    value_for,
    warmup_kwargs,
)
from kernels._device import default_device

PLANNED = ("structural", "conditional_law")


@pytest.fixture(scope="module")
def keys():
    return planned_keys("ci", 0, default_device().type, jobs=0, names=PLANNED)  # compiled: CUDA tensors


def test_arg_class_is_triton_own_partition():
    """Two values get the same class exactly when Triton's own specialisation gives them the same
    key (checked with Triton's native specialiser, with and without value/alignment specialisation)."""
    tensors = [torch.zeros(4), torch.zeros(4)[1:], torch.zeros(4, dtype=torch.bfloat16)[1:]]
    values = [*INT_FOR_CLASS.values(), 2, 32, -16, 2**31 - 1, 2**40 + 3, *tensors,
              Pointer(torch.int64, True), Pointer(torch.int32, False)]
    for spec, align in ((True, True), (False, False)):
        ours = [arg_class(v, spec, align) for v in values]
        triton = [native_specialize_impl(BaseBackend, v, False, spec, align) for v in values]
        for i in range(len(values)):
            for j in range(len(values)):
                assert (ours[i] == ours[j]) == (triton[i] == triton[j]), (values[i], values[j], spec)


def test_every_planned_key_is_rebuilt_exactly_by_its_warmup_arguments(keys):
    assert len(keys) > 10
    for kernel, key in keys:
        fn = jit_function(kernel)
        assert specialisation_key(fn, (), warmup_kwargs(fn, key)) == key, kernel


def test_planned_keys_are_the_planned_check_keys(keys):
    """The enumeration is a planned check (harness/compiles/planning.py, itself checked against real launches
    in tests/harness/test_planning.py): per property, the same keys as planning it alone."""
    from harness.compiles.planning import GPU_DEVICE_TYPE, PlannedKernel, gpu_planning
    from harness.properties import REGISTRY
    from tests.harness.property_helpers import cpu_context

    seen = set()
    for name in PLANNED:
        ctx = cpu_context(seed=0, device=default_device().type, sized_for=GPU_DEVICE_TYPE,
                          stat_seconds_per_property=float("inf"))
        with gpu_planning() as log:
            REGISTRY[name].run(PlannedKernel(), ctx)
        seen |= {(r.kernel, r.key) for r in log.records}
    assert seen == keys


def test_compile_step_runs_every_key(keys):
    done, errors = compile_keys(keys, jobs=0)  # the interpreter's warmup returns at once
    assert done == len(keys) and errors == []


def test_value_for_refuses_what_it_cannot_build():
    assert value_for("(16, 'x')", constexpr=True) == (16, "x") and value_for("i32/16", False) == 16
    with pytest.raises(ValueError):
        value_for("Foo:bar", constexpr=False)


def test_the_xdist_controller_prewarms_only_our_kernels_on_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("SPECFUZZ_PREWARM", raising=False)
    monkeypatch.setenv("SPECFUZZ_SEED", "4")
    ours = types.SimpleNamespace(getoption=lambda name: None)
    argv = conftest.prewarm_argv(ours, ["0"])
    assert argv[:2] == ["-m", "harness.compiles.prewarm"] and argv[-3:] == ["--seed", "4", "--corpus"]
    assert conftest.prewarm_argv(types.SimpleNamespace(getoption=lambda n: "x.y:z"), ["0"]) is None
    assert conftest.prewarm_argv(ours, []) is None
    monkeypatch.setenv("SPECFUZZ_PREWARM", "0")
    assert conftest.prewarm_argv(ours, ["0"]) is None


def test_the_xdist_workers_get_a_gpu_each_and_no_prewarm_of_their_own(monkeypatch):
    """The controller prewarms once; a ``check`` in a worker must not start a pool of its own."""
    monkeypatch.setattr(conftest, "visible_gpus", lambda: ["0", "1"])
    monkeypatch.setattr(conftest, "prewarm_argv", lambda config, gpus: None)
    specs = [types.SimpleNamespace(env={}) for _ in range(3)]
    conftest.pytest_xdist_setupnodes(None, specs)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0", "1", "0"]
    assert all(s.env["SPECFUZZ_PREWARM"] == "0" for s in specs)


def test_a_prewarmed_run_is_not_planned_again_and_another_compiles_only_new_keys(tmp_path, monkeypatch):
    """The manifests (harness/compiles/prewarm.py, 3): the same run again plans and compiles
    nothing; another seed compiles only the keys no earlier run of this build compiled."""
    from harness.compiles import prewarm as pw

    compiled = []

    def fake_compile(keys, jobs):
        compiled.append(set(keys))
        return len(keys), []

    monkeypatch.setattr(pw, "compile_keys", fake_compile)
    store, said = pw.Manifests(tmp_path / "build"), []

    def run(seed):  # planning with tensors on the device the kernels run on
        return pw.prewarm("ci", seed, jobs=0, device=default_device().type, names=PLANNED, manifests=store,
                          say=said.append)

    first = run(0)
    assert first > 10 and compiled[0] and len(compiled[0]) == first
    monkeypatch.setattr(pw, "_plan_one", lambda *a, **k: pytest.fail("planned again"))
    assert run(0) == first
    assert len(compiled) == 1 and "compiled already" in said[-1]
    monkeypatch.undo()
    monkeypatch.setattr(pw, "compile_keys", fake_compile)
    run(1)
    assert not compiled[1] & compiled[0], "keys compiled by the first run were compiled again"
    assert store.compiled() >= compiled[0] | compiled[1]
    assert pw.Manifests.for_this_build("cpu") is None  # nothing is compiled on the CPU
    said.clear()
    with_corpus = pw.prewarm("ci", 0, jobs=0, device=default_device().type, names=PLANNED, manifests=store,
                             say=said.append, corpus=True)
    assert with_corpus > first and compiled[-1], "the corpus replay's keys are planned too (--corpus)"
    assert not compiled[-1] & compiled[0]  # a run of its own, which compiles only the new keys


def test_a_background_prewarm_plans_what_a_blocking_one_plans_and_records_it_once_done(tmp_path):
    """``prewarm(..., background=True)`` (what ``check`` uses on a GPU): the same keys as planning in
    this process, compiled by a pool while the caller goes on; ``wait`` records the manifest."""
    from harness.compiles import prewarm as pw

    names = ("degenerate_rows_outcome",)
    device = default_device().type
    store = pw.Manifests(tmp_path / "build")
    ready = []
    handle = pw.prewarm("ci", 0, jobs=2, device=device, names=names, manifests=store, say=lambda s: None,
                        background=True, ready=ready.extend)
    assert isinstance(handle, pw.Prewarm)
    got = handle.wait()
    expected = planned_keys("ci", 0, device, jobs=0, names=names)
    assert handle.keys == expected and got == len(expected) > 0
    assert sorted(ready) == sorted(expected), "each key is handed on once it is compiled"
    run = pw.Manifests.run_name("ci", 0, None, list(names), pw.OUR_KERNELS)
    assert store.keys_of(run) == expected
    assert pw.prewarm("ci", 0, jobs=2, device=device, names=names, manifests=store, say=lambda s: None,
                      background=True) is None, "a recorded run is not prewarmed again"


def test_a_prewarm_stopped_before_its_plans_are_done_records_nothing(tmp_path):
    """A run that ends first stops the prewarm at once; without every plan there is no manifest,
    even when the run asks for one (``record``), so the next run plans again."""
    import time

    from harness.compiles import prewarm as pw

    store, said = pw.Manifests(tmp_path / "build"), []
    handle = pw.prewarm("ci", 0, jobs=1, device=default_device().type, names=("structural", "layout_reuse"),
                        manifests=store, say=said.append, background=True)
    started = time.perf_counter()
    handle.stop(record=True)
    assert time.perf_counter() - started < 4, "the run waited for a plan or compile in progress"
    assert not store.compiled() and "stopped with the run" in said[-1] and "manifest" not in said[-1]


def test_planning_in_this_process_records_and_hands_on_the_keys_in_the_runs_order(tmp_path):
    """``jobs=0``: the manifest lists the keys by the first property that plans them, as a
    background prewarm's does, and ``ready`` gets them once compiled."""
    from harness.compiles import prewarm as pw

    store, ready = pw.Manifests(tmp_path / "build"), []
    pw.prewarm("ci", 0, jobs=0, device=default_device().type, names=PLANNED, manifests=store,
               say=lambda s: None, ready=ready.extend)
    first = planned_keys("ci", 0, default_device().type, jobs=0, names=PLANNED[:1])
    records = store.records_of(pw.Manifests.run_name("ci", 0, None, list(PLANNED), pw.OUR_KERNELS))
    assert ready == records and set(records[: len(first)]) == first
