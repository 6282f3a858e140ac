"""The small-batch launch (kernels/fused_decide.py) against the separate launches.

Chunks of at most ``tuning.FUSE_DECIDE_MAX_REQS`` requests run as one launch. Results must equal
the separate launches bit for bit, or batch and chunk invariance would break wherever one batch is
chunked into small and large chunks. Under the interpreter the programs run one after another in
grid order, so these tests check the plumbing (roles, counters, stage order); on the GPU they also
check the concurrent path and that the fused decide rounds like the decide kernel (same code, same
warps).
"""

from __future__ import annotations

import pytest

import kernels
import kernels.driver
from kernels import tuning
from tests.kernels._batches import (
    PATH_FAMILIES,
    PATH_SHAPES,
    Batch,
    assert_same_outputs,
    make_batch,
    run_kernel,
)

FUSE = "FUSE_DECIDE_MAX_REQS"
CASES = [(method, with_draft) for method in ("token", "block") for with_draft in (True, False)]
SHAPES = PATH_SHAPES
FAMILIES = PATH_FAMILIES


def _run(batch, method, **kwargs):
    return run_kernel(batch, method, want_logprobs=True, **kwargs)


@pytest.mark.parametrize("method,with_draft", CASES)
def test_fused_equals_unfused_bit_for_bit(method, with_draft, kernel_setting):
    for i, (vocab, dtype) in enumerate(SHAPES):
        for j, family in enumerate(FAMILIES):
            seed = 9100 + 10 * i + j
            print("seed", seed, vocab, dtype, family)
            batch = make_batch(seed, num_reqs=1 + seed % 4, max_k=6, vocab=vocab, dtype=dtype, family=family,
                               with_draft=with_draft, greedy_fraction=0.3)
            kernel_setting(tuning, FUSE, 0)
            unfused = _run(batch, method)
            kernel_setting(tuning, FUSE, 4)
            fused = _run(batch, method)
            assert_same_outputs(unfused, fused, (seed, method, with_draft, vocab, family))


@pytest.mark.parametrize("method", ["token", "block"])
def test_small_chunks_of_a_large_batch_match_it(method, kernel_setting):
    """A batch of 9 requests (unfused) against budgets that cut it into chunks of 1-4 (fused)."""
    vocab, dtype = SHAPES[0]
    batch = make_batch(9200, num_reqs=9, max_k=5, vocab=vocab, dtype=dtype, greedy_fraction=0.25)
    print("seed", batch.seed)
    kernel_setting(tuning, FUSE, 4)
    whole = _run(batch, method, max_chunk_bytes=None)
    for budget in (1, 5000, 20000):
        assert_same_outputs(whole, _run(batch, method, max_chunk_bytes=budget), (method, budget))


def _count_launches(monkeypatch):
    """Calls of the separate launchers the driver makes (the small-batch launch replaces them)."""
    calls = []
    for name in ("launch_row_stats", "launch_decide", "launch_residual_mass", "launch_residual_sample"):
        real = getattr(kernels.driver, name)
        monkeypatch.setattr(kernels.driver, name,
                            lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    return calls


@pytest.mark.parametrize("method,with_draft", CASES)
def test_small_chunks_are_one_launch(method, with_draft, kernel_setting, monkeypatch):
    calls = _count_launches(monkeypatch)
    vocab, dtype = SHAPES[0]
    small = make_batch(9300, lengths=[3, 0, 2], vocab=vocab, dtype=dtype, with_draft=with_draft)
    kernel_setting(tuning, FUSE, 4)
    _run(small, method)
    assert calls == [], calls
    kernel_setting(tuning, FUSE, 2)
    _run(small, method)
    two_stage = method == "block" and with_draft
    expected = ["launch_row_stats", "launch_decide"] + (["launch_residual_mass", "launch_decide"] if two_stage
                                                        else []) + ["launch_residual_sample"]
    assert calls == expected, calls


def test_block_without_any_draft_row_takes_the_separate_launches(kernel_setting, monkeypatch):
    """Pass 2 has no programs when no request has a draft, so nothing would publish its stage."""
    calls = _count_launches(monkeypatch)
    vocab, dtype = SHAPES[0]
    batch = make_batch(9400, lengths=[0, 0], vocab=vocab, dtype=dtype, with_draft=True, greedy_fraction=0.0)
    kernel_setting(tuning, FUSE, 4)
    fused = _run(batch, "block")
    assert "launch_decide" in calls, calls
    kernel_setting(tuning, FUSE, 0)
    assert_same_outputs(_run(batch, "block"), fused, "no drafts")


@pytest.mark.parametrize("lengths", [[0], [1], [16], [3, 0, 2], [20, 0], [0, 0, 0, 0]])
def test_outputs_bound_before_the_check_have_the_checked_shape(lengths, kernel_setting):
    """Small one-chunk calls allocate and bind their outputs before the value check says how wide they
    are (views of storages sized for the widest allowed). The outputs must still be contiguous
    ``[R, max_k + 1]`` tensors equal to the separate launches' and to the host-lengths path's, whether
    the geometry was fixed before the check ([20, 0]: widths 11-21 straddle ROWS 16 / 32) or not."""
    vocab, dtype = SHAPES[0]
    batch = make_batch(9500 + sum(lengths), lengths=lengths, vocab=vocab, dtype=dtype, greedy_fraction=0.3)
    print("seed", batch.seed)
    width = max(lengths) + 1
    kernel_setting(tuning, FUSE, 0)
    separate = _run(batch, "token")
    kernel_setting(tuning, FUSE, 4)
    for kwargs in ({}, {"draft_lengths": lengths}):
        out = _run(batch, "token", **kwargs)
        assert_same_outputs(separate, out, (lengths, kwargs))
        for tensor in (out[0], out[2]):
            assert tensor.shape == (len(lengths), width) and tensor.is_contiguous(), (tensor.shape, kwargs)


@pytest.mark.parametrize("vocab,dtype", SHAPES)
def test_block_with_single_drafts_runs_one_decide_stage(vocab, dtype, kernel_setting, monkeypatch):
    """With at most one draft per request no ``Z`` enters any ``h`` (``h_1 = p_1``), so a block
    chunk with draft logits decides in one stage and launches no pass 2. Its requests match the same
    requests decided in two stages beside a longer draft, bit for bit."""
    kernel_setting(tuning, FUSE, 0)
    calls = _count_launches(monkeypatch)
    longer = make_batch(9500, lengths=[1, 1, 0, 1, 1, 3], vocab=vocab, dtype=dtype, with_draft=True,
                        greedy_fraction=0.2)
    print("seed", longer.seed)
    single = Batch(longer.seed, longer.target_logits[:9], longer.draft_logits[:4], longer.draft_token_ids[:4],
                   longer.cu_num_draft_tokens[:6], longer.temperature[:5], longer.seeds[:5],
                   longer.positions[:5], lengths=longer.lengths[:5])
    one_stage = _run(single, "block")
    assert calls == ["launch_row_stats", "launch_decide", "launch_residual_sample"], calls
    calls.clear()
    ids, num, logprobs = _run(longer, "block")
    assert calls == ["launch_row_stats", "launch_decide", "launch_residual_mass", "launch_decide",
                     "launch_residual_sample"], calls
    assert_same_outputs((ids[:5, :2], num[:5], logprobs[:5, :2]), one_stage, "one stage vs two")
