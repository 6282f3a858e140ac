"""Specialisation keys (harness/compiles/keys.py) and the H200 launch plan worked out on the CPU
(harness/compiles/planning.py), checked against real launches under the interpreter."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from harness.compiles.keys import LaunchLog, arg_class, distinct, kernel_params, specialisation_key, varied
from harness.compiles.planning import PlannedKernel, _repeating_batches, gpu_planning, host_summary
from harness.properties import REGISTRY, statistical
from harness.properties.base import PASS
from harness.properties.statistical_cases import large_vocab_rows
from kernels import _device, tuning
from kernels.decide import _decide_kernel
from tests.harness.property_helpers import cpu_context

INTERPRETER_TUNING = {"BLOCK_V": tuning.BLOCK_V, "RACE_BLOCK_V": tuning.RACE_BLOCK_V,
                      "RACE_PRUNE_MIN_ENTRIES": tuning.RACE_PRUNE_MIN_ENTRIES}


def test_arg_class_follows_triton_specialisation():
    assert [arg_class(v) for v in (1, 16, 17, 2**31, 2**63)] == ["1", "i32/16", "i32", "i64/16", "u64/16"]
    assert arg_class(1, specialise=False) == "i32" and arg_class(32, specialise=False) == "i32"
    buf = torch.zeros(8, dtype=torch.float32)
    assert arg_class(buf) == "*float32/16" and arg_class(buf[1:]) == "*float32"
    assert arg_class(buf[1:], align=False) == "*float32" and arg_class(buf, align=False) == "*float32"
    assert (arg_class(True), arg_class(0.5), arg_class(None)) == ("u1", "fp32", "None")


def test_kernel_params_read_launch_jit_exemptions():
    params = {p.name: p for p in kernel_params(_decide_kernel.fn)}
    assert not params["out_width"].specialise and params["target_stride"].specialise
    assert not params["cu_ptr"].align and params["target_ptr"].align
    assert params["ROWS"].constexpr and not params["vocab_size"].constexpr
    key = dict(specialisation_key(_decide_kernel.fn, (), {"ROWS": 16, "num_warps": 4}))
    assert key == {"ROWS": "16", "num_warps": "4"}


def test_varied_names_the_parameters_that_differ():
    keys = {("m.k", (("A", "1"), ("B", "x"))), ("m.k", (("A", "2"), ("B", "x")))}
    assert varied(keys) == {"k": {"A": ["1", "2"]}}


def _planned_and_real_keys(name: str, examples: int):
    ctx = cpu_context(seed=2)
    ctx = dataclasses.replace(ctx, profile=dataclasses.replace(ctx.profile, max_examples=examples))
    from harness.adapters.triton_kernels import kernel

    with LaunchLog() as log:
        real = REGISTRY[name].run(kernel, ctx)
    with gpu_planning(INTERPRETER_TUNING, dependent_launches=False) as plan:
        planned = REGISTRY[name].run(PlannedKernel(kernel), dataclasses.replace(ctx, extra={}))
    return real, planned, distinct(log.records), distinct(plan.records)


@pytest.mark.interpreter
@pytest.mark.skipif(not _device.INTERPRETING, reason="compares interpreter launches with a plan made with "
                    "the interpreter's tuning; on a GPU bench/prewarm_keycheck.py compares compiled launches")
def test_planning_makes_the_launches_of_a_real_run():
    """With the interpreter's own settings, a planned run (launches recorded, not run; oracle
    answers) draws the same cases and makes launches with the same keys as the real run."""
    real, planned, real_keys, planned_keys = _planned_and_real_keys("structural", 2)
    assert real.verdict == planned.verdict == PASS and real.cases == planned.cases
    assert real_keys and real_keys == planned_keys


@pytest.mark.interpreter
@pytest.mark.skipif(not _device.INTERPRETING, reason="compares interpreter launches with a plan made with "
                    "the interpreter's tuning")
@pytest.mark.parametrize("entry", ["degenerate-vocab-2-block", "degenerate-greedy-exact-ties"])
def test_planning_the_corpus_replay_makes_its_launches(entry):
    """The controller's prewarm plans the regression corpus's replay too (``--corpus``): planned with
    the interpreter's settings, an entry's replay makes the launches of a real replay."""
    from harness.adapters.triton_kernels import kernel
    from harness.campaigns.corpus import CORPUS_DIR, replay_entry

    path = f"{CORPUS_DIR}/{entry}.json"
    with LaunchLog() as log:
        real = replay_entry(path, kernel, cpu_context(seed=0))
    with gpu_planning(INTERPRETER_TUNING, dependent_launches=False) as plan:
        planned = replay_entry(path, PlannedKernel(kernel), cpu_context(seed=0))
    assert real.properties_run and not real.failed and planned.properties_run == real.properties_run
    assert distinct(log.records) and distinct(log.records) == distinct(plan.records)


def test_constant_answers_plan_layout_reuse_as_the_oracle_does():
    """``layout_reuse`` compares the kernel only with itself, so it is planned with one constant
    answer per request (``plans_with_constant_answers``): the same cases, the same keys as with the
    oracle's answers (which were half of its planning: 16.5 s -> 2.4 s, gpu profile, seed 11, CPU)."""
    from harness.adapters.triton_kernels import kernel

    assert REGISTRY["layout_reuse"].plans_with_constant_answers
    assert not REGISTRY["coupled_exactness"].plans_with_constant_answers  # judged against the oracle
    ctx = cpu_context(seed=4, device=_device.default_device().type)  # compiled kernels take CUDA tensors only
    ctx = dataclasses.replace(ctx, profile=dataclasses.replace(ctx.profile, max_examples=4))
    plans = {}
    for constant in (False, True):
        with gpu_planning() as plan:
            result = REGISTRY["layout_reuse"].run(PlannedKernel(kernel, constant_answers=constant),
                                                  dataclasses.replace(ctx, extra={}))
        assert result.verdict == PASS and result.cases, (result.note, [str(f)[:300] for f in result.failures])
        plans[constant] = (result.cases, distinct(plan.records))
    assert plans[True] == plans[False] and plans[True][1]


def test_gpu_planning_uses_the_h200_launch_plan():
    from harness.generation.cases import Case, build_batch

    case = Case(vocab_size=20001, draft_lens=[2], temperatures=[1.0], seeds=[1], positions=[0],
                method="block")
    kernel = PlannedKernel()
    with gpu_planning() as plan:
        out = kernel.verify(build_batch(case, _device.default_device()))
    keys = dict((k.rsplit(".", 1)[-1], dict(v)) for k, v in distinct(plan.records))
    small = keys["_small_batch_kernel"]
    assert small["BLOCK_V"] == "8192" and small["MODE_BLOCK"] == "8192" and small["vocab_size"] == "i32"
    assert out.num_emitted.shape == (1,) and tuning.BLOCK_V == INTERPRETER_TUNING["BLOCK_V"]  # restored


def test_repeating_first_token_batches_keep_the_sequence_of_shapes(monkeypatch):
    from harness.properties import statistical_sampling

    monkeypatch.setitem(statistical_sampling._BATCH_BYTES, "cpu", 3 * 300 * 4 * 7)  # 7 replicas a batch
    row = large_vocab_rows(np.random.default_rng(0), 300)[1]
    shapes = lambda gen: [(b.num_reqs, tuple(b.target_logits.shape), b.target_logits.stride())
                          for b, _ in gen(row, "token", 25, 5, torch.device("cpu"))]
    real = shapes(statistical._first_token_batches)
    assert real == shapes(_repeating_batches(statistical._first_token_batches))
    assert [n for n, *_ in real] == [7, 7, 7, 4]


@pytest.mark.parametrize("cu,ids,temps", [
    ([0, 2, 2, 5], [3, 0, 7, 1, 2], [1.0, 0.0, 0.5]),
    ([0, 3, 1, 4], [-1, 9, 2, 5], [float("nan"), -1.0, 2.0]),  # decreasing cu, bad ids and temperatures
    ([0], [], []),
])
def test_host_summary_equals_the_summary_kernel(cu, ids, temps):
    from kernels.validation import SUMMARY_SCALARS, PendingCheck

    device = _device.default_device()  # compiled kernels take CUDA tensors only
    cu_t = torch.tensor(cu, dtype=torch.int32, device=device)
    ids_t = torch.tensor(ids, dtype=torch.int64, device=device)
    temp_t = torch.tensor(temps, dtype=torch.float32, device=device)
    pending = PendingCheck(ids_t, cu_t, temp_t, 10, want_lengths=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the summary lands in host memory asynchronously
    want = pending._host[: pending._size].clone()
    got = torch.full_like(want, -7)
    host_summary(cu_t, ids_t, temp_t, got, num_reqs=len(cu) - 1, num_drafts=len(ids), copy_cu=True)
    assert got.tolist() == want.tolist() and want.numel() == SUMMARY_SCALARS + len(cu)
