"""The pruned race (kernels/residual_sample.py, ``PRUNE``) against the unpruned one.

Every block of a pruned race stores bounds of its best score; the request's last block races only
the blocks whose upper bound reaches the best lower bound. That must never change a result: the
winner's block always races, with the unpruned code. These tests check both halves of that claim:
the outputs equal the unpruned race's bit for bit over every logit family (ties, near-one-hot rows,
masked tails, logits of 1e4, tiny temperatures), and the pruning does prune (about one block per
request races exactly), so a bound that pruned nothing would fail here too. The interpreter runs
programs in grid order; on the GPU the blocks of a request race concurrently.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import chunking, tuning
from kernels._device import INTERPRETING
from kernels.residual_sample import PRUNE_MARGIN, PRUNE_RELATIVE
from tests.kernels._batches import DEVICE, FAMILIES, assert_same_outputs, make_batch, run_kernel

PRUNE = "RACE_PRUNE_MIN_ENTRIES"  # 0: every race prunes; NEVER: none does
NEVER = 1 << 62
CASES = [(method, with_draft) for method in ("token", "block") for with_draft in (True, False)]
# (vocab, dtype, requests): more than 4 requests, so the chunk runs the separate launches (the
# small-batch launch never prunes); the interpreter's race blocks are 256 wide, the GPU's 4096.
SHAPES = ([(1000, torch.float32, 6), (2000, torch.bfloat16, 5)] if INTERPRETING or DEVICE.type != "cuda"
          else [(32000, torch.bfloat16, 64), (262144, torch.bfloat16, 24), (151936, torch.float32, 16)])


def _pair(batch, method, kernel_setting):
    kernel_setting(tuning, PRUNE, NEVER)
    plain = run_kernel(batch, method, want_logprobs=True)
    kernel_setting(tuning, PRUNE, 0)
    pruned = run_kernel(batch, method, want_logprobs=True)
    return plain, pruned


@pytest.mark.parametrize("method,with_draft", CASES)
def test_pruned_race_equals_unpruned_bit_for_bit(method, with_draft, kernel_setting):
    for i, (vocab, dtype, num_reqs) in enumerate(SHAPES):
        for j, family in enumerate(FAMILIES):
            seed = 9700 + 10 * i + j
            print("seed", seed, vocab, dtype, family)
            batch = make_batch(seed, num_reqs=num_reqs, max_k=4, vocab=vocab, dtype=dtype, family=family,
                               with_draft=with_draft, greedy_fraction=0.2)
            plain, pruned = _pair(batch, method, kernel_setting)
            assert_same_outputs(plain, pruned, (seed, method, with_draft, vocab, family))


def _raced_blocks(ws, num_reqs: int) -> np.ndarray:
    """Blocks per request whose upper bound reaches the proven score (the ones the last block races),
    read from a pruned call's workspace: ``res_score`` holds the upper bounds, ``done[2R:3R]`` the
    proven scores as ``ordered_key`` integers."""
    blocks = ws.res_score.numel() // num_reqs
    key = ws.done[2 * num_reqs: 3 * num_reqs].cpu().numpy().astype(np.int32)
    proven = (key ^ ((key >> 31) & 0x7FFFFFFF)).view(np.float32).astype(np.float64)
    uppers = ws.res_score[: num_reqs * blocks].cpu().numpy().reshape(num_reqs, blocks)
    slack = PRUNE_MARGIN.value + (np.abs(proven) + 64.0) * PRUNE_RELATIVE.value
    return (uppers >= (proven - slack)[:, None]).sum(axis=1)


@pytest.mark.parametrize("method,with_draft", [("token", True), ("token", False), ("block", True)])
def test_pruned_race_races_about_one_block_per_request(method, with_draft, kernel_setting):
    """Sampled requests of every family race few blocks exactly; none races zero (the winner's block
    is always a candidate), and no request races every block."""
    vocab, dtype, num_reqs = SHAPES[0]
    kernel_setting(tuning, PRUNE, 0)
    raced = []
    for j, family in enumerate(FAMILIES):
        batch = make_batch(9800 + j, num_reqs=num_reqs, max_k=3, vocab=vocab, dtype=dtype, family=family,
                           with_draft=with_draft, greedy_fraction=0.0)
        chunking.release_workspaces()
        run_kernel(batch, method)
        (_, ws), = chunking._reuse.entries.values()
        counts = _raced_blocks(ws, num_reqs)
        blocks = ws.res_score.numel() // num_reqs
        print(family, "blocks raced per request", counts.tolist(), "of", blocks)
        assert blocks >= 4
        assert counts.min() >= 1 and counts.max() < blocks, (family, counts)
        raced += counts.tolist()
    assert np.mean(raced) <= 1.5, raced
