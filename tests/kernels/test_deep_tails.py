"""Rejections at a mode shared by near-one-hot target and draft rows, whose tails float32 cannot hold.

Found by ``harness check --profile gpu --seed 14`` (coupled_exactness, on the H200 and, shrunk, on the
CPU): at T = 7e-7 a bf16 draft row had tail e^-435.6 and its target row e^-1110, both 0 in float32.
The residual ``(b - q)_+`` is then ``t_q - t_b ~ e^-435.6`` on the shared mode and ~e^-1110 on the
tokens where ``b > q``; kernels that form it from float32 tails see an empty mode and emit one of
those. The deep-tail path (kernels/deep_tails.py, run by the decide kernel) takes the mode's
residual from log-domain tails. Every request here is decided by hundreds of nats, so any uniforms
give the same answer; the same requests are a crafted case of the harness's coupled_exactness
(``harness.generation.crafted``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.generation.crafted import DEEP_TEMPERATURE, deep_tail_logits
from tests.kernels._batches import (
    DEVICE,
    Agreement,
    Batch,
    compare_to_reference,
    reference_result,
    run_kernel,
)


def _one_draft_batch(target, draft, draft_ids, seed: int) -> Batch:
    """Requests of one draft each (``target`` holds two rows per request) at ``DEEP_TEMPERATURE``,
    with seeded randomness."""
    reqs = len(draft_ids)
    rng = np.random.default_rng(seed)
    as_t = lambda a, dt: torch.tensor(np.asarray(a), dtype=dt).to(DEVICE)
    return Batch(
        seed=seed, target_logits=as_t(target, torch.float32), draft_logits=as_t(draft, torch.float32),
        draft_token_ids=as_t(draft_ids, torch.int64), cu_num_draft_tokens=as_t(range(reqs + 1), torch.int32),
        temperature=as_t([DEEP_TEMPERATURE] * reqs, torch.float32),
        seeds=as_t(rng.integers(0, 2**62, reqs), torch.int64),
        positions=as_t(rng.integers(0, 2**40, reqs), torch.int64),
        lengths=[1] * reqs)


def deep_tail_batch(seed: int) -> Batch:
    """``harness.generation.crafted``'s deep-tail requests (module docstring there) with seeded randomness."""
    target, draft = deep_tail_logits()
    return _one_draft_batch(target, draft, [1, 1, 1], seed)


@pytest.mark.interpreter
@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_mode_residual_below_float32(method, seed):
    batch = deep_tail_batch(seed)
    ref = reference_result(batch, method, want_logprobs=True)
    assert ref.output_token_ids[:2, 0].tolist() == [0, 0], ref.output_token_ids
    assert ref.output_token_ids[2, 0] >= 2
    assert np.all(np.abs(ref.sample_margins[:2]) > 100.0)  # not a float32 tie
    out = run_kernel(batch, method, want_logprobs=True)
    tally = Agreement()
    compare_to_reference(batch, method, out, ref, tally)
    assert not tally.mismatches, "\n".join(tally.mismatches)
    assert tally.ties == 0


def _embedded(rows: np.ndarray, vocab: int, offset: int) -> np.ndarray:
    """``rows`` placed at columns ``offset..`` of ``-inf`` rows of width ``vocab``."""
    out = np.full((rows.shape[0], vocab), -np.inf, dtype=np.float32)
    out[:, offset:offset + rows.shape[1]] = rows
    return out


@pytest.mark.interpreter
@pytest.mark.parametrize("method", ["token", "block"])
def test_deep_tails_away_from_the_first_block_and_split_modes(method):
    """The crafted rows moved to columns 700..707 of V = 1000 (the interpreter's pass-1 blocks are
    256 wide, so the mode sits in block 2 among masked lanes), plus a request whose deep rows have
    DIFFERENT modes (target 700, draft 702, draft token 702): the decide kernel must find the
    target's mode in its max block and leave the split request to the ordinary race, which emits 700."""
    target, draft = deep_tail_logits()
    split_target, split_draft = target[:2], draft[:1].copy()
    split_draft[0, [0, 2]] = split_draft[0, [2, 0]]
    vocab, offset = 1000, 700
    target = _embedded(np.concatenate([target, split_target]), vocab, offset)
    draft = _embedded(np.concatenate([draft, split_draft]), vocab, offset)
    batch = _one_draft_batch(target, draft, [offset + 1] * 3 + [offset + 2], 11)
    ref = reference_result(batch, method, want_logprobs=True)
    assert ref.output_token_ids[[0, 1, 3], 0].tolist() == [offset] * 3
    out = run_kernel(batch, method, want_logprobs=True)
    tally = Agreement()
    compare_to_reference(batch, method, out, ref, tally)
    assert not tally.mismatches and tally.ties == 0, "\n".join(tally.mismatches)
