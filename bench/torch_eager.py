"""A straightforward PyTorch eager implementation of our verification (the benchmark's baseline).

Same contract, randomness and decision rules as ``kernels.rejection_sample`` (docs/interfaces.md
sections 1-2), written the obvious way: full ``[rows, V]`` log-softmax copies, a Python loop over
draft slots vectorised over requests, Philox in int64 tensor arithmetic. ``compute_dtype=float64``
makes it a second oracle for the kernel tests; ``float32`` (the default) is the fair speed baseline.
"""

from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85


def _mul_hi_lo(a: torch.Tensor, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32-bit words of ``a * b`` (uint32 values held in int64) without int64 overflow."""
    low = a * (b & 0xFFFF)  # < 2**48
    mid = a * (b >> 16)  # < 2**48
    low_sum = low + ((mid & 0xFFFF) << 16)  # < 2**49
    return (mid >> 16) + (low_sum >> 32), low_sum & _MASK32


def philox_words(seed, c0, c1, c2, c3) -> torch.Tensor:
    """The four words of Philox4x32-10 keyed by the int64 ``seed`` (two's complement), counters as
    int64; stacked along a new last dimension."""
    k0, k1 = seed & _MASK32, (seed >> 32) & _MASK32
    c0, c1, c2, c3, k0, k1 = torch.broadcast_tensors(c0, c1, c2, c3, k0, k1)
    for _ in range(10):
        hi_b, lo_b = _mul_hi_lo(c2, _ROUND_B)
        hi_a, lo_a = _mul_hi_lo(c0, _ROUND_A)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + _KEY_A) & _MASK32, (k1 + _KEY_B) & _MASK32
    return torch.stack((c0, c1, c2, c3), dim=-1)


def uniforms(seed, position, stream: int, vocab_index) -> torch.Tensor:
    """float32 uniforms in (0, 1) for (seed, absolute position, stream, vocab index), broadcast: word
    ``v & 3`` of the Philox call with ``c0 = v >> 2``."""
    vocab_index = torch.as_tensor(vocab_index, device=position.device)
    words = philox_words(
        seed, vocab_index >> 2, position & _MASK32, (position >> 32) & _MASK32,
        torch.full_like(position, stream),
    )
    word = torch.broadcast_to(vocab_index & 3, words.shape[:-1])
    bits = torch.gather(words, -1, word.unsqueeze(-1).to(torch.int64)).squeeze(-1)
    u = (bits.to(torch.float32) + 0.5) * 2.0**-32
    return u.clamp(max=1.0 - 2.0**-24)


def rejection_sample_eager(
    target_logits,
    draft_logits,
    draft_token_ids,
    cu_num_draft_tokens,
    temperature,
    seeds,
    positions,
    *,
    method="token",
    want_logprobs=False,
    compute_dtype=torch.float32,
):
    """Returns ``(output_token_ids, num_emitted, logprobs | None)`` like ``kernels.rejection_sample``."""
    device = target_logits.device
    cu = cu_num_draft_tokens.to(torch.int64)
    lengths = cu[1:] - cu[:-1]
    num_reqs, vocab = lengths.numel(), target_logits.shape[1]
    max_k = int(lengths.max()) if num_reqs else 0
    reqs = torch.arange(num_reqs, device=device)
    first_target_row = cu[:-1] + reqs

    # Per-row temperature-scaled log-probabilities (greedy rows: raw log-softmax).
    greedy = ~(temperature > 0)
    divisor = torch.where(greedy, torch.ones_like(temperature), temperature).to(compute_dtype)
    row_req = torch.repeat_interleave(reqs, lengths + 1)
    log_b_rows = torch.log_softmax(target_logits.to(compute_dtype) / divisor[row_req, None], dim=-1)
    argmax_rows = torch.argmax(target_logits, dim=-1)  # first maximal index

    # Draft slots padded to [R, max_k].
    slot = torch.arange(max_k, device=device)
    valid = slot[None, :] < lengths[:, None]
    draft_index = (cu[:-1, None] + slot[None, :]).clamp(max=max(draft_token_ids.numel() - 1, 0))
    target_row = first_target_row[:, None] + slot[None, :]
    x = torch.where(valid, draft_token_ids[draft_index] if draft_token_ids.numel() else -1, -1)
    x_ok = valid & (x >= 0) & (x < vocab)
    x_safe = torch.where(x_ok, x, 0)
    neg_inf = torch.tensor(float("-inf"), dtype=compute_dtype, device=device)
    log_b = torch.where(x_ok, log_b_rows[target_row.clamp(max=log_b_rows.shape[0] - 1), x_safe], neg_inf)
    if draft_logits is not None:
        log_q_rows = torch.log_softmax(
            draft_logits.to(compute_dtype) / divisor[torch.repeat_interleave(reqs, lengths), None], dim=-1
        )
        log_q = torch.where(x_ok, log_q_rows[draft_index, x_safe] if draft_token_ids.numel() else 0.0, 0.0)
    else:
        log_q = torch.zeros_like(log_b)
    u = uniforms(seeds[:, None], positions[:, None] + slot[None, :], 0, torch.zeros_like(slot)[None, :])
    u = u.to(compute_dtype)

    accept_greedy = x_ok & (x == argmax_rows[target_row.clamp(max=log_b_rows.shape[0] - 1)])
    accept_token = valid & (u * log_q.exp() < log_b.exp())
    accept = torch.where(greedy[:, None], accept_greedy, accept_token)
    tau = accept.to(torch.int64).cumprod(dim=1).sum(dim=1)
    p_tau = torch.ones(num_reqs, dtype=compute_dtype, device=device)

    if method == "block":
        log_p = torch.zeros(num_reqs, dtype=compute_dtype, device=device)
        log_p_before = torch.zeros((num_reqs, max_k), dtype=compute_dtype, device=device)
        for s in range(max_k):
            log_p_before[:, s] = log_p
            stepped = torch.clamp(log_p + log_b[:, s] - log_q[:, s], max=0.0)
            stepped = torch.where(log_q[:, s] == float("-inf"), 0.0, stepped)
            log_p = torch.where((log_p == float("-inf")) | (log_b[:, s] == float("-inf")), neg_inf, stepped)
            log_p = torch.where(valid[:, s], log_p, log_p_before[:, s])
        p_before = log_p_before.exp()
        if draft_logits is not None:  # Z_{s+1} = sum (p_s b - q)_+ over target row s, draft row s
            weights = (
                (
                    p_before[:, :, None] * log_b_rows[target_row.clamp(max=log_b_rows.shape[0] - 1)].exp()
                    - log_q_rows[draft_index].exp()
                )
                if draft_token_ids.numel()
                else None
            )
            mass = weights.clamp(min=0).sum(-1) if weights is not None else p_before
        else:
            mass = p_before * (1 - log_b.exp())
        denominator = mass + (1 - p_before)
        h = torch.where(denominator > 0, mass / torch.where(denominator > 0, denominator, 1.0), 1.0)
        # h_i for i = 1..k lives at column i - 1: slots 1.. use h of slot i, the last uses p_k.
        h_i = torch.cat([h[:, 1:], h[:, :1]], dim=1) if max_k else h
        is_last = slot[None, :] == (lengths[:, None] - 1)
        h_i = torch.where(is_last, log_p.exp()[:, None], h_i)
        passes = valid & (u <= h_i)
        block_tau = torch.where(passes, slot[None, :] + 1, 0).max(dim=1).values if max_k else tau
        tau = torch.where(greedy, tau, block_tau)
        p_tau = torch.where(
            tau < lengths,
            p_before.gather(1, tau.clamp(max=max(max_k - 1, 0))[:, None])[:, 0] if max_k else p_tau,
            1.0,
        )

    # Correction / bonus: one row per request, exponential race.
    emit_row = first_target_row + tau
    rejected = tau < lengths
    b = log_b_rows[emit_row].exp()
    if draft_logits is not None and draft_token_ids.numel():
        q = log_q_rows[(cu[:-1] + tau).clamp(max=draft_token_ids.numel() - 1)].exp()
        residual = (p_tau[:, None] * b - q).clamp(min=0)
    else:
        excluded = torch.where(
            rejected, x.gather(1, tau.clamp(max=max(max_k - 1, 0))[:, None])[:, 0] if max_k else -1, -1
        )
        residual = torch.where(torch.arange(vocab, device=device)[None, :] == excluded[:, None], 0.0, b)
    residual = torch.where(rejected[:, None], residual, b)
    residual = torch.where((residual > 0).any(dim=1, keepdim=True), residual, b)
    u_sample = uniforms(
        seeds[:, None], (positions + tau)[:, None], 1, torch.arange(vocab, device=device)[None, :]
    ).to(compute_dtype)
    scores = residual.log() - (-torch.log1p(-u_sample)).log()
    sampled_token = torch.argmax(scores, dim=1)
    token = torch.where(greedy, argmax_rows[emit_row], sampled_token)

    out_ids = (
        torch.where(slot[None, :] < tau[:, None], x, -1)
        if max_k
        else torch.empty((num_reqs, 0), dtype=torch.int64, device=device)
    )
    out_ids = torch.cat([out_ids, torch.full((num_reqs, 1), -1, dtype=torch.int64, device=device)], dim=1)
    out_ids.scatter_(1, tau[:, None], token[:, None])
    logprobs = None
    if want_logprobs:
        accepted_lp = (
            torch.where(slot[None, :] < tau[:, None], log_b, 0.0)
            if max_k
            else out_ids[:, :0].to(compute_dtype)
        )
        logprobs = torch.cat([accepted_lp, torch.zeros((num_reqs, 1), dtype=compute_dtype, device=device)], 1)
        logprobs.scatter_(1, tau[:, None], log_b_rows[emit_row, token][:, None])
        logprobs = logprobs.to(torch.float32)
    return out_ids, (tau + 1).to(torch.int32), logprobs
