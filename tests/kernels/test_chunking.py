"""Chunking: the plan equals ``reference.chunking.plan_chunks``, results are bit-identical for every
budget (1 byte .. unbounded), and the workspace of a chunk stays within the budget."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from kernels.chunking import plan_chunks, plan_for_budget, workspace_bytes_per_logit_row
from kernels.driver import verify_into
from tests.kernels._batches import DEVICE, make_batch, run_kernel


def test_plan_matches_notes_example():
    assert plan_chunks([0, 3, 4, 11, 13], 5) == [(0, 2), (2, 3), (3, 4)]
    assert plan_chunks([0, 3, 4, 11, 13], None) == [(0, 4)]
    assert plan_chunks([0], 5) == []


def test_plan_matches_reference():
    ref = pytest.importorskip("reference.chunking")
    rng = np.random.default_rng(5)
    for _ in range(300):
        sizes = rng.integers(1, 10, rng.integers(1, 12))
        cu = [0] + np.cumsum(sizes).tolist()
        budget = int(rng.integers(1, 40))
        assert plan_chunks(cu, budget) == ref.plan_chunks(cu, budget), (cu, budget)


@pytest.mark.interpreter
@pytest.mark.parametrize("method,with_draft", [("token", True), ("block", True), ("block", False)])
def test_chunked_equals_unchunked_bit_for_bit(method, with_draft):
    seed = int(os.environ.get("SPECFUZZ_SEED", "31")) + (method == "block") + 2 * with_draft
    print(f"seed {seed}")
    batch = make_batch(seed, lengths=[2, 0, 3, 1, 2], vocab=300, with_draft=with_draft, greedy_fraction=0.3)
    whole = run_kernel(batch, method, want_logprobs=True, max_chunk_bytes=None)
    per_row = workspace_bytes_per_logit_row(2, 2)  # V = 300 with 256-wide blocks (statistics and race)
    rng = np.random.default_rng(seed)
    budgets = [1, per_row, 3 * per_row + 1, int(rng.integers(1, 20 * per_row)), 1 << 30]
    for budget in budgets:
        chunked = run_kernel(batch, method, want_logprobs=True, max_chunk_bytes=budget)
        for a, b in zip(whole, chunked, strict=True):
            assert torch.equal(a, b), f"budget {budget}"


@pytest.mark.interpreter
def test_workspace_within_budget():
    batch = make_batch(8, lengths=[1, 1, 4, 0, 2, 1], vocab=300)
    per_row = workspace_bytes_per_logit_row(2, 2)
    lengths = batch.lengths
    for budget in (1, 2 * per_row, 6 * per_row, None):
        out_ids = torch.empty((6, 5), dtype=torch.int64, device=DEVICE)
        out_num = torch.empty(6, dtype=torch.int32, device=DEVICE)
        sizes = verify_into(out_ids, out_num, None, *batch.args(), lengths, method="block",
                            max_chunk_bytes=budget, block_size=256)  # 2 vocab blocks
        chunks = plan_for_budget(lengths, 2, 2, budget)
        assert len(sizes) == len(chunks)
        for (start, end), size in zip(chunks, sizes, strict=True):
            alone = end - start == 1
            if budget is not None and not alone:
                assert size <= budget
            assert size <= per_row * sum(k + 1 for k in lengths[start:end])

