"""The pipelined launch (kernels/pipelined.py) against the separate launches.

Chunks of more than ``tuning.fuse_decide_max_reqs()`` requests without a second pass run as one
launch whose programs take pass-1, decide and race roles by ticket. Results must equal the separate
launches bit for bit (batch and chunk invariance depend on it). Under the interpreter programs run
one at a time in grid order, so these tests check the plumbing (slots, rounds, counters, the lag);
on the GPU they also check the concurrent path at real vocabularies.
"""

from __future__ import annotations

import pytest

import kernels
import kernels.driver
from kernels._device import INTERPRETING
from tests.kernels._batches import PATH_FAMILIES, PATH_SHAPES, assert_same_outputs, make_batch, run_kernel

PIPE = "SPECFUZZ_PIPELINE"
CASES = [("token", True), ("token", False), ("block", False)]  # block with draft logits: two passes
SHAPES = PATH_SHAPES
FAMILIES = PATH_FAMILIES
NUM_REQS = 6 if INTERPRETING else 40


def _run(batch, method, **kwargs):
    return run_kernel(batch, method, want_logprobs=True, **kwargs)


@pytest.mark.parametrize("method,with_draft", CASES)
def test_pipelined_equals_separate_launches_bit_for_bit(method, with_draft, tuning_env):
    for i, (vocab, dtype) in enumerate(SHAPES):
        for j, family in enumerate(FAMILIES):
            seed = 9600 + 10 * i + j
            print("seed", seed, vocab, dtype, family)
            batch = make_batch(seed, num_reqs=NUM_REQS, max_k=6, vocab=vocab, dtype=dtype, family=family,
                               with_draft=with_draft, greedy_fraction=0.3)
            tuning_env(PIPE, "0")
            separate = _run(batch, method)
            tuning_env(PIPE, "1")
            assert_same_outputs(separate, _run(batch, method), (seed, method, with_draft, vocab, family))


@pytest.mark.parametrize("lag", ["1", "7", "100000"])
def test_every_lag_gives_the_same_result(lag, tuning_env):
    """The lag only moves race programs later in ticket order (1 request .. all of them)."""
    vocab, dtype = SHAPES[0]
    batch = make_batch(9700, num_reqs=NUM_REQS + 1, max_k=5, vocab=vocab, dtype=dtype, greedy_fraction=0.25)
    print("seed", batch.seed)
    tuning_env(PIPE, "0")
    separate = _run(batch, "token")
    tuning_env(PIPE, "1")
    tuning_env("SPECFUZZ_PIPELINE_LAG", lag)
    assert_same_outputs(separate, _run(batch, "token"), lag)


def test_chunks_of_a_batch_match_it(tuning_env):
    """Budgets that cut 11 requests into small (single-launch) and larger (pipelined) chunks."""
    vocab, dtype = SHAPES[0]
    batch = make_batch(9800, num_reqs=11, max_k=5, vocab=vocab, dtype=dtype, with_draft=False,
                       greedy_fraction=0.25)
    print("seed", batch.seed)
    tuning_env(PIPE, "1")
    whole = _run(batch, "block", max_chunk_bytes=None)
    for budget in (1, 5000, 40000):
        assert_same_outputs(whole, _run(batch, "block", max_chunk_bytes=budget), budget)


def _count_launches(monkeypatch):
    calls = []
    for name in ("launch_row_stats", "launch_decide", "launch_residual_mass", "launch_residual_sample",
                 "launch_pipelined"):
        real = getattr(kernels.driver, name)
        monkeypatch.setattr(kernels.driver, name,
                            lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    return calls


@pytest.mark.parametrize("method,with_draft", CASES + [("block", True)])
def test_which_chunks_are_pipelined(method, with_draft, tuning_env, monkeypatch):
    calls = _count_launches(monkeypatch)
    vocab, dtype = SHAPES[0]
    batch = make_batch(9900, lengths=[3, 0, 2, 1, 4, 0], vocab=vocab, dtype=dtype, with_draft=with_draft)
    tuning_env(PIPE, "1")
    _run(batch, method)
    two_stage = method == "block" and with_draft
    separate = ["launch_row_stats", "launch_decide"] + (["launch_residual_mass", "launch_decide"] if two_stage
                                                        else []) + ["launch_residual_sample"]
    assert calls == (separate if two_stage else ["launch_pipelined"]), calls
    calls.clear()
    tuning_env(PIPE, "0")
    _run(batch, method)
    assert calls == separate, calls
