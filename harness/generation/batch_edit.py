"""Transformations of a ``VerifyBatch`` that invariance checks compare against the original.

Each returns a new batch and leaves its argument untouched. Per-request randomness travels with the
request (its seed and position), so a correct kernel's output for a request must not change.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from harness.contract import VerifyBatch, VerifyOutput


def request_rows(batch: VerifyBatch, r: int) -> tuple[range, range]:
    """(target rows, draft rows) of request ``r``."""
    cu = batch.cu_num_draft_tokens.tolist()
    return range(cu[r] + r, cu[r + 1] + r + 1), range(cu[r], cu[r + 1])


def select_requests(batch: VerifyBatch, order: list[int]) -> VerifyBatch:
    """The requests ``order`` (a permutation or a subset, in that order) as a batch of their own."""
    dev = batch.device
    target_rows, draft_rows = [], []
    for r in order:
        t, d = request_rows(batch, r)
        target_rows.extend(t)
        draft_rows.extend(d)
    lengths = [len(request_rows(batch, r)[1]) for r in order]
    cu = torch.tensor(
        [0] + list(torch.tensor(lengths, dtype=torch.int64).cumsum(0).tolist()), dtype=torch.int32, device=dev
    )
    idx_t = torch.tensor(target_rows, dtype=torch.int64, device=dev)
    idx_d = torch.tensor(draft_rows, dtype=torch.int64, device=dev)
    idx_r = torch.tensor(order, dtype=torch.int64, device=dev)
    return replace(
        batch,
        target_logits=batch.target_logits.index_select(0, idx_t).contiguous(),
        draft_logits=None
        if batch.draft_logits is None
        else batch.draft_logits.index_select(0, idx_d).contiguous(),
        draft_token_ids=batch.draft_token_ids.index_select(0, idx_d).contiguous(),
        cu_num_draft_tokens=cu,
        temperature=batch.temperature.index_select(0, idx_r).contiguous(),
        seeds=batch.seeds.index_select(0, idx_r).contiguous(),
        positions=batch.positions.index_select(0, idx_r).contiguous(),
    )


def one_hot_draft_logits(batch: VerifyBatch) -> torch.Tensor:
    """Draft logits that make each draft a point mass on its token: 0 there, ``-inf`` elsewhere."""
    logits = torch.full(
        (batch.num_draft_total, batch.vocab_size),
        float("-inf"),
        dtype=batch.target_logits.dtype,
        device=batch.device,
    )
    if batch.num_draft_total:
        logits[torch.arange(batch.num_draft_total, device=batch.device), batch.draft_token_ids] = 0.0
    return logits


def request_output(out: VerifyOutput, r: int, with_logprobs: bool) -> tuple:
    """Request ``r``'s emitted tokens (and logprobs) as plain values, for bit-for-bit comparison."""
    n = int(out.num_emitted[r])
    tokens = tuple(out.output_token_ids[r, :n].tolist())
    logprobs = tuple(out.logprobs[r, :n].tolist()) if with_logprobs and out.logprobs is not None else ()
    return n, tokens, logprobs


def exact_shift_grid(dtype: torch.dtype) -> tuple[float, float, float]:
    """(grid step, largest |logit|, largest |shift|) such that logits on the grid plus a shift on the
    grid stay exactly representable in ``dtype`` (so shifting changes no bit of ``(l + c) - max``)."""
    if dtype == torch.bfloat16:  # 8 significant bits: 2**-2 grid, |l + c| < 2**5
        return 2.0**-2, 8.0, 16.0
    if dtype == torch.float16:  # 11 significant bits: 2**-4 grid, |l + c| < 2**6
        return 2.0**-4, 16.0, 32.0
    return 2.0**-8, 1024.0, 8192.0  # float32, 24 bits: 2**-8 grid, |l + c| < 2**14


def quantised(logits: torch.Tensor, step: float, bound: float) -> torch.Tensor:
    """Finite logits rounded to multiples of ``step`` and clipped to ``[-bound, bound]``; ``-inf`` kept."""
    x = logits.double()
    q = torch.clamp(torch.round(x / step) * step, -bound, bound)
    return torch.where(torch.isneginf(x), x, q).to(logits.dtype)


def shifted_rows(logits: torch.Tensor, shifts: torch.Tensor) -> torch.Tensor:
    """``logits + shifts[:, None]`` (exact when both lie on the grid of ``exact_shift_grid``)."""
    return (logits.double() + shifts.double()[:, None]).to(logits.dtype)
