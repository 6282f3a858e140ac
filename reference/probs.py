"""Temperature-scaled probabilities in float64, shared by the verifier, the exact laws and the sampler.

Conventions (docs/interfaces.md section 2): ``b = softmax(logits / T)`` with the request's ``T``
applied to target AND draft rows; greedy rows (``T == 0``) use raw logits (``T = 1``) for logprobs and
the lowest-index argmax for decisions. A row that is all ``-inf`` or contains NaN yields NaN
probabilities; callers treat such rows as degenerate (interfaces.md section 3).
"""

from __future__ import annotations

import numpy as np


def effective_temperature(temperature) -> np.ndarray:
    """float64 temperatures with greedy (``0``) replaced by ``1`` (raw logits for greedy logprobs)."""
    t = np.asarray(temperature, dtype=np.float64)
    return np.where(t == 0.0, 1.0, t)


def log_softmax_rows(logits, temperature) -> np.ndarray:
    """``log_softmax(logits / T)`` per row, float64; ``temperature`` broadcasts against rows (``[n]``).

    The normaliser is ``log1p(tail)``, the tail being the sum of ``exp(z - max)`` over every entry
    but one maximal one: a near-one-hot row (tiny ``T``) keeps a tail far below float64's epsilon,
    and the residual at a mode shared by target and draft is exactly the difference of their tails
    (``log(1 + tail)`` would round both to 0 and cancel it)."""
    z = np.asarray(logits, dtype=np.float64) / np.asarray(temperature, dtype=np.float64)[..., None]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        top = np.max(z, axis=-1, keepdims=True)
        shifted = z - top
        e = np.exp(shifted)
        if e.shape[-1]:
            np.put_along_axis(e, np.argmax(shifted, axis=-1)[..., None], 0.0, axis=-1)
        tail = np.sum(e, axis=-1, keepdims=True)
        # a NaN anywhere in the row (NaN or +inf logits) keeps the whole row NaN (degenerate), as
        # log(sum) did: zeroing the argmax must not hide it
        tail = np.where(np.isnan(shifted).any(axis=-1, keepdims=True), np.nan, tail)
        return shifted - np.log1p(tail)


def softmax_rows(logits, temperature) -> np.ndarray:
    """``softmax(logits / T)`` per row, float64 (exact zeros where a logit is ``-inf``)."""
    z = np.asarray(logits, dtype=np.float64) / np.asarray(temperature, dtype=np.float64)[..., None]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        e = np.exp(z - np.max(z, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)


def greedy_argmax(logits) -> tuple[np.ndarray, np.ndarray]:
    """Lowest-index argmax of each raw-logit row and the top-2 logit gap (``inf`` when ``V == 1``).

    NaN entries are treated as ``-inf`` so the id is always in ``[0, V)``.
    """
    z = np.asarray(logits, dtype=np.float64)
    z = np.where(np.isnan(z), -np.inf, z)
    ids = np.argmax(z, axis=-1)
    if z.shape[-1] < 2:
        return ids, np.full(ids.shape, np.inf)
    top2 = -np.partition(-z, 1, axis=-1)[..., :2]
    with np.errstate(invalid="ignore"):
        gap = top2[..., 0] - top2[..., 1]
    return ids, np.where(np.isnan(gap), 0.0, gap)


def rescaled_pair(log_target_prob, log_draft_prob) -> tuple[np.ndarray, np.ndarray]:
    """``(b(x), q(x))`` both divided by ``max(b(x), q(x))``, computed from their logs.

    The ratio ``b(x) / q(x)`` is all that token and block decisions use, and at tiny temperatures both
    probabilities underflow float64 (``log b = -772, log q = -781`` is ``0 / 0`` in probability space
    but a ratio of ``e^9``). Rescaled, the larger of the two is 1 and the ratio is exact; zeros stay
    zeros, so the conventions of ``clipped_ratio_step`` still apply.
    """
    lb = np.asarray(log_target_prob, dtype=np.float64)
    lq = np.asarray(log_draft_prob, dtype=np.float64)
    top = np.maximum(lb, lq)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.exp(lb - top), np.exp(lq - top)


def residual_log_weights(log_scale, log_target, log_draft) -> np.ndarray:
    """``log((scale * b - q)_+)`` elementwise, from logs (``-inf`` where the residual is 0).

    ``a + log1p(-exp(log q - a))`` with ``a = log scale + log b`` keeps the residual exact where both
    probabilities underflow (at T = 1e-8 a residual can live entirely on tokens with ``b = e^-147533``,
    which is 0.0 in probability space). NaN inputs give ``-inf`` (never a winner).
    """
    a = np.asarray(log_scale, dtype=np.float64) + np.asarray(log_target, dtype=np.float64)
    lq = np.asarray(log_draft, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        gap = np.minimum(lq - a, 0.0)
        # log(1 - e^gap): expm1 where q is close to p*b (gap near 0), log1p where it is far below.
        log_one_minus = np.where(gap > -np.log(2.0), np.log(-np.expm1(gap)), np.log1p(-np.exp(gap)))
        out = np.where(lq - a < 0, a + log_one_minus, -np.inf)
    return np.where(np.isnan(out), -np.inf, out)


def point_mass_log_rows(draft_token_ids, vocab_size: int) -> np.ndarray:
    """``log q`` rows of point-mass drafts: 0 at each draft token, ``-inf`` elsewhere."""
    ids = np.asarray(draft_token_ids, dtype=np.int64).reshape(-1)
    rows = np.full((ids.size, vocab_size), -np.inf)
    rows[np.arange(ids.size), ids] = 0.0
    return rows


def clipped_ratio_step(p_prev, target_prob, draft_prob) -> np.ndarray:
    """Block verification's ``p_i = min(p_{i-1} * b_i(x_i) / q_i(x_i), 1)``, clipped at EVERY step.

    ``q_i(x_i) == 0`` (a draft token its own draft could not have produced; only fuzzed inputs do this)
    counts as an infinite ratio when ``p_{i-1} * b_i(x_i) > 0`` and as 0 otherwise, which agrees with
    token verification's ``u * q < b`` for ``g == 1``.
    """
    num = np.asarray(p_prev, dtype=np.float64) * target_prob
    q = np.asarray(draft_prob, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(q > 0, num / np.where(q > 0, q, 1.0), np.where(num > 0, np.inf, 0.0))
    return np.minimum(ratio, 1.0)


def stop_probability(residual_mass, p_i) -> np.ndarray:
    """Block verification's ``h_i = Z_{i+1} / (Z_{i+1} + 1 - p_i)``; 1 when the denominator is 0."""
    z = np.asarray(residual_mass, dtype=np.float64)
    den = z + (1.0 - np.asarray(p_i, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, z / np.where(den > 0, den, 1.0), 1.0)
