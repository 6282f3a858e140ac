"""``bench.bench_kernels.make_inputs``' greedy share: which requests turn greedy, what their drafts
are, and that everything else is drawn as without it (the benchmark's tables rest on these inputs)."""

from __future__ import annotations

import pytest
import torch

import kernels
from bench.bench_kernels import call_args, make_inputs
from tests.kernels._batches import DEVICE


def _inputs(greedy, data="uniform", reqs=20, k=3, vocab=50):
    gen = torch.Generator().manual_seed(7)
    return make_inputs(reqs, k, vocab, torch.float32, True, gen, 1.0, data, greedy)


@pytest.mark.parametrize("share, want", [(0.0, []), (0.1, [9, 19]), (0.25, [3, 7, 11, 15, 19]),
                                         (1.0, list(range(20)))])
def test_greedy_requests_are_spread_evenly(share, want):
    temperature = _inputs(share)["temperature"]
    assert torch.nonzero(temperature == 0).flatten().tolist() == want
    assert (temperature[temperature != 0] >= 0.5).all()


@pytest.mark.parametrize("data", ["uniform", "close"])
def test_everything_but_greedy_requests_is_drawn_as_without(data):
    plain, mixed = _inputs(0.0, data), _inputs(0.25, data)
    sampled = mixed["temperature"] != 0
    assert torch.equal(plain["temperature"][sampled], mixed["temperature"][sampled])
    for name in ("target_logits", "draft_logits", "cu_num_draft_tokens", "seeds", "positions"):
        assert torch.equal(plain[name], mixed[name]), name
    ids = plain["draft_token_ids"]
    keep = sampled.repeat_interleave(ids.numel() // sampled.numel()) if data == "close" else ids == ids
    assert torch.equal(ids[keep], mixed["draft_token_ids"][keep])


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_close_greedy_drafts_are_the_argmax_and_all_accepted(dtype):
    """In the logits' own dtype, ties at the max included (the lowest index): seed 13 puts a
    three-way tie at the max of one bfloat16 row."""
    vocab = 4096
    batch = make_inputs(3, 3, vocab, dtype, True, torch.Generator().manual_seed(13), 1.0, "close", 1.0)
    target = batch["target_logits"].view(3, 4, vocab)[:, :3].float()
    ties = (target == target.max(dim=2, keepdim=True).values).sum(dim=2)
    assert ties.max().item() == (3 if dtype == torch.bfloat16 else 1)
    assert torch.equal(batch["draft_token_ids"], target.argmax(dim=2).flatten())
    _, num, _ = kernels.rejection_sample(*[t.to(DEVICE) for t in call_args(batch)])
    assert num.tolist() == [4, 4, 4]


def test_share_outside_zero_to_one_is_rejected():
    with pytest.raises(ValueError, match="greedy"):
        _inputs(1.5)
