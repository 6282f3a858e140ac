"""Greedy rows' argmax (kernels/decide.py ``_greedy_argmax``, since v24 read by decide from the
row's first pass-1 block attaining the row max): the lowest index of the largest non-NaN logit,
across pass-1 blocks and at the row's partial last block; an all-NaN or all ``-inf`` row names
column 0 (docs/kernels.md, "Bad input": NaN logits never win a greedy argmax)."""

from __future__ import annotations

import pytest
import torch

from kernels import tuning
from tests.kernels._batches import make_batch, run_kernel

VOCAB = 700  # several pass-1 blocks under the interpreter (256 wide) and a partial last one
NAN, NEG_INF = float("nan"), float("-inf")


def _rows(vocab: int) -> tuple[torch.Tensor, list[int]]:
    """Greedy target rows (one per request, no drafts) and the index each must emit."""
    rows = torch.randn(7, vocab, generator=torch.Generator().manual_seed(5)).clamp(-3.0, 3.0)
    want = []
    rows[0, 300] = 9.0  # NaN before and after the max, in its block and in block 0
    rows[0, [0, 5, 299, 301]] = NAN
    want.append(300)
    rows[1, [600, 290, 280]] = 9.0  # a tie within a block and across blocks: the lowest index
    want.append(280)
    rows[2] = NAN
    want.append(0)
    rows[3] = NEG_INF
    want.append(0)
    rows[4] = NAN  # NaN everywhere but one finite logit, in a later block
    rows[4, 650] = -50.0
    want.append(650)
    rows[5, vocab - 1] = 9.0  # the last column, in the partial last block
    want.append(vocab - 1)
    rows[6, 256] = 9.0  # the first column of a block whose neighbour ends just below it
    rows[6, 255] = 8.9  # distinct from 9.0 in bfloat16 too
    want.append(256)
    return rows, want


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("num_reqs", [7, 3])  # separate launches, and the small-batch single launch
def test_greedy_argmax_is_the_lowest_index_of_the_largest_non_nan(dtype, num_reqs):
    rows, want = _rows(VOCAB)
    batch = make_batch(31, lengths=[0] * num_reqs, vocab=VOCAB, dtype=dtype, with_draft=False)
    batch.temperature.zero_()
    batch.target_logits.copy_(rows[:num_reqs].to(dtype))
    print("block", tuning.BLOCK_V, "dtype", dtype)
    ids, num, _ = run_kernel(batch, "token", want_logprobs=True)
    assert num.tolist() == [1] * num_reqs
    assert ids[:, 0].tolist() == want[:num_reqs]


@pytest.mark.interpreter
def test_greedy_acceptance_uses_the_same_argmax():
    """A greedy draft is accepted exactly when it names that index: a draft at a later tie of the
    max, or at a NaN, is rejected and the lowest index is emitted instead."""
    rows, _ = _rows(VOCAB)
    batch = make_batch(32, lengths=[1, 1, 1, 1, 1], vocab=VOCAB, with_draft=False)
    batch.temperature.zero_()
    target = batch.target_logits.view(5, 2, VOCAB)
    rows = rows.to(target.device)
    target[:, 0] = rows[[1, 1, 0, 0, 5]]
    target[:, 1] = rows[6]
    batch.draft_token_ids.copy_(torch.tensor([280, 600, 300, 301, VOCAB - 1]))
    ids, num, _ = run_kernel(batch, "token")
    assert num.tolist() == [2, 1, 2, 1, 2]
    assert ids[:, 0].tolist() == [280, 280, 300, 300, VOCAB - 1]
    assert ids[[0, 2, 4], 1].tolist() == [256, 256, 256]  # the bonus row's argmax


@pytest.mark.interpreter
@pytest.mark.parametrize("num_reqs", [6, 3])  # separate launches, and the small-batch single launch
def test_greedy_rows_up_to_the_first_rejection_all_get_their_argmax(num_reqs):
    """Decide reads the argmax of a greedy request's rows only up to the first draft that cannot hold
    its row's max (kernels/decide.py): accepted slots, a rejection at a later tie of the max, and the
    degenerate rows whose argmax is column 0 (a draft of 0 is accepted there, and the scan must run
    for it although its logit is not the max)."""
    rows, _ = _rows(VOCAB)
    lengths = [3, 3, 3, 2, 2, 2][:num_reqs]
    batch = make_batch(33, lengths=lengths, vocab=VOCAB, with_draft=False)
    batch.temperature.zero_()
    plans = [  # (target rows, drafts, emitted ids)
        ([0, 5, 1, 6], [300, VOCAB - 1, 280], [300, VOCAB - 1, 280, 256]),
        ([0, 5, 1, 6], [300, 5, 280], [300, VOCAB - 1]),  # slot 1's draft is not its row max
        ([0, 5, 1, 6], [300, VOCAB - 1, 600], [300, VOCAB - 1, 280]),  # 600 ties the max, 280 is lower
        ([2, 3, 6], [0, 0], [0, 0, 256]),  # all-NaN, then all -inf: argmax 0, both accepted
        ([3, 0, 6], [3, 300], [0]),  # all -inf: its draft holds the max, the argmax is 0
        ([2, 0, 6], [5, 300], [0]),  # all-NaN: a draft other than 0 is rejected
    ][:num_reqs]
    row, drafts = 0, []
    for sources, plan_drafts, _ in plans:
        for source in sources:
            batch.target_logits[row] = rows[source].to(batch.target_logits.device)
            row += 1
        drafts += plan_drafts
    batch.draft_token_ids.copy_(torch.tensor(drafts))
    ids, num, _ = run_kernel(batch, "token")
    for r, (_, _, emitted) in enumerate(plans):
        assert num[r].item() == len(emitted), r
        assert ids[r, : len(emitted)].tolist() == emitted, r
