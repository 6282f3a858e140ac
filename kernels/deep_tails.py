"""Corrections at a mode shared by near-one-hot target and draft rows whose tails float32 cannot hold.

After a rejection the residual ``(s b - q)_+`` (``s = p_tau`` for block, 1 for token) at a token
``m`` that is the mode of both rows is ``(s t_q - t_b - (1 - s)) / ((1 + t_b)(1 + t_q))``, ``t`` being
each row's tail ``sum_{v != m} e^{(x_v - x_m)/T}``. Pass 1 keeps tails in float32, so below ~1e-38
they are 0 and that residual vanishes; it can be the whole residual (found by
``harness check --profile gpu --seed 14``: at T = 7e-7 a draft tail of e^-435.6 against a target
tail of e^-1110; the kernel emitted a token of residual e^-1110, the oracle the mode).

A request is *deep* when it rejected with draft logits and both rows' float32 ``log1p(tail)`` lie
in ``[0, 2^-64)``; above that bound float32 tails lose at most ``V * 2^-126`` of flushed terms
against a tail of at least 2^-64, so the ordinary race is exact to float32 rounding. The decide
kernel handles a deep request itself: :func:`deep_tail_race` races over the whole residual row in a
sequential loop (the race's scores off the mode, bit for bit: same formula and uniforms), sums
both rows' tails in log2 space on the way, and scores the mode from them
(:func:`shared_mode_log2_residual`). It then writes the token and sets the request's race counter to
``CLAIMED``, which the race's last-block test never matches, so the race kernel leaves the request
alone. Kept out of the race kernel on purpose: there, even an untaken branch for this raised the
kernel from 80 to 128-168 registers and its time at 512 x 262144 fp32 by 22-32 % on the H200.
"""

from __future__ import annotations

import kernels._device  # noqa: F401
import triton
import triton.language as tl

from kernels.fastmath import LOG2E, fast_log2
from kernels.randomness import SAMPLE_STREAM, log2_exponential_from_uniform, sampling_uniforms_block
from kernels.residual_sample import NEG_INF, _no_nan, log2_positive_part
from kernels.row_stats import log2_prob

DEEP_TAIL = tl.constexpr(5.421010862427522e-20)  # 2^-64, bound on log1p(tail) of both rows
CLAIMED = tl.constexpr(-(1 << 30))  # race counter of a request the decide kernel already emitted
DEEP_BLOCK = tl.constexpr(512)  # columns per step of the sequential loop


@triton.jit
def is_deep(t_log_sum, q_log_sum):
    """Both rows' float32 ``log1p(tail)`` in ``[0, 2^-64)`` (NaN rows are never deep)."""
    return (t_log_sum >= 0) & (t_log_sum < DEEP_TAIL) & (q_log_sum >= 0) & (q_log_sum < DEEP_TAIL)


@triton.jit
def shared_mode_log2_residual(log2_scale, target_log2_tail, draft_log2_tail):
    """``log2 (s b_m - q_m)_+`` at a mode ``m`` shared by both rows, from their log2 tails
    (``reference.probs.shared_mode_log_residual``): ``s t_q - (t_b + 1 - s)`` over
    ``(1 + t_b)(1 + t_q)``; the denominator is dropped, as deep tails are below 2^-64.
    ``log2_scale`` is ``log2 s`` (0 for token verification)."""
    gained = log2_scale + draft_log2_tail
    one_minus_s = log2_positive_part(0.0, log2_scale)  # -inf when s == 1
    hi = tl.maximum(target_log2_tail, one_minus_s)
    lo = tl.minimum(target_log2_tail, one_minus_s)
    lost = tl.where(hi == NEG_INF, NEG_INF, hi + fast_log2(1.0 + tl.exp2(lo - hi)))
    return log2_positive_part(gained, lost)


@triton.jit
def _merge_log2_tail(top, total, rel, mode_lane):
    """Running ``(top, total)`` with ``log2 tail = top + log2 total``, extended by the log2 values
    ``rel`` of a block's lanes off ``mode_lane`` (``top = -inf`` while nothing has been added)."""
    off = tl.where(mode_lane, NEG_INF, rel)
    new_top = tl.maximum(top, tl.max(off, axis=0))
    safe = tl.where(new_top == NEG_INF, 0.0, new_top)
    kept = tl.where(top == NEG_INF, 0.0, total * tl.exp2(top - safe))
    return new_top, kept + tl.sum(tl.exp2(off - safe), axis=0)


@triton.jit
def deep_tail_race(target_ptr, draft_ptr, target_stride, draft_stride, target_row, draft_row, vocab_size,
                   t_max, t_log_sum, q_max, q_log_sum, inv_t, log2_scale, seed, position,
                   BLOCK: tl.constexpr):
    """The residual race of a deep request over its whole row: ``(best score, token)``, ties to the
    lowest index, best ``-inf`` when the residual is empty (then the race kernel's fallback runs)."""
    zero = inv_t * 0.0  # loop-carried scalars start as tensors (inv_t is finite for sampled rows)
    best, mode_log_e = zero + NEG_INF, zero
    t_top, t_total, q_top, q_total = best, zero, best, zero
    token = tl.program_id(0) * 0
    mode = token - 1
    for start in range(0, vocab_size, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        in_vocab = cols < vocab_size
        xt = tl.load(target_ptr + target_row.to(tl.int64) * target_stride + cols, mask=in_vocab,
                     other=NEG_INF).to(tl.float32)
        xd = tl.load(draft_ptr + draft_row.to(tl.int64) * draft_stride + cols, mask=in_vocab,
                     other=NEG_INF).to(tl.float32)
        log_b = log2_prob(xt, t_max, inv_t, t_log_sum)
        u = sampling_uniforms_block(seed, start, position, SAMPLE_STREAM, BLOCK)
        log_e = log2_exponential_from_uniform(u)
        log_w = log2_positive_part(log2_scale + log_b, log2_prob(xd, q_max, inv_t, q_log_sum))
        t_mode = in_vocab & (xt == t_max)
        q_mode = in_vocab & (xd == q_max)
        shared = t_mode & q_mode
        scores = _no_nan(tl.where(in_vocab & ~shared, log_w - log_e, NEG_INF))
        block_best = tl.max(scores, axis=0)
        token = tl.where(block_best > best, tl.argmax(scores, axis=0, tie_break_left=True) + start, token)
        best = tl.maximum(block_best, best)
        t_top, t_total = _merge_log2_tail(t_top, t_total, (xt - t_max) * (inv_t * LOG2E), t_mode)
        q_top, q_total = _merge_log2_tail(q_top, q_total, (xd - q_max) * (inv_t * LOG2E), q_mode)
        mode = tl.maximum(mode, tl.max(tl.where(shared, cols, -1), axis=0))
        mode_log_e += tl.sum(tl.where(shared, log_e, 0.0), axis=0)
    t_tail = tl.where(t_top == NEG_INF, NEG_INF, t_top + fast_log2(t_total))
    q_tail = tl.where(q_top == NEG_INF, NEG_INF, q_top + fast_log2(q_total))
    mode_score = shared_mode_log2_residual(log2_scale, t_tail, q_tail) - mode_log_e
    take = ((mode >= 0) & (mode_score > NEG_INF)
            & ((mode_score > best) | ((mode_score == best) & (mode < token))))
    return tl.where(take, mode_score, best), tl.where(take, mode, token)
