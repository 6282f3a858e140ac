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


# Below this the linear tail of ``log_softmax_with_tails`` is recomputed in log space (float64's
# smallest normal is 2.2e-308; the margin keeps every summed term far above the subnormal range).
_LOG_SPACE_TAIL_BELOW = 1e-280


def log_softmax_with_tails(logits, temperature) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(log_probs, mode, log_tail)`` per row of ``logits / T``, float64.

    - ``log_probs``: ``log_softmax(logits / T)``, normalised by ``log1p(tail)``;
    - ``mode``: the row's first argmax;
    - ``log_tail``: ``log(tail)``, ``tail = sum_{v != mode} exp(z_v - z_mode)``, exact in log space
      also where the tail underflows float64 (``-inf`` when the mode is the only finite entry).

    A near-one-hot row (tiny ``T``) keeps a tail far below float64's epsilon, and the residual at a
    mode shared by target and draft is exactly the difference of their tails (``log(1 + tail)`` would
    round it away; :func:`shared_mode_log_residual` takes the logs of the tails, so tails below
    1e-308 survive too). A row with a NaN anywhere (NaN or ``+inf`` logits) is all NaN (degenerate);
    its ``mode`` is unspecified."""
    z = np.asarray(logits, dtype=np.float64) / np.asarray(temperature, dtype=np.float64)[..., None]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        top = np.max(z, axis=-1, keepdims=True)
        shifted = z - top
        mode = np.argmax(shifted, axis=-1) if shifted.shape[-1] else np.zeros(shifted.shape[:-1], np.int64)
        off_mode = shifted.copy()
        if shifted.shape[-1]:
            np.put_along_axis(off_mode, mode[..., None], -np.inf, axis=-1)
        tail = np.sum(np.exp(off_mode), axis=-1)
        log_tail = np.log(tail)
        deep = np.flatnonzero(tail.reshape(-1) < _LOG_SPACE_TAIL_BELOW)
        if deep.size:
            rows = off_mode.reshape(-1, off_mode.shape[-1])[deep]
            second = np.max(rows, axis=-1, keepdims=True)
            finite = np.isfinite(second[:, 0])
            safe = np.where(np.isfinite(second), second, 0.0)
            deep_log = np.where(finite, safe[:, 0] + np.log(np.sum(np.exp(rows - safe), axis=-1)), -np.inf)
            log_tail.reshape(-1)[deep] = deep_log
        # a NaN anywhere in the row (NaN or +inf logits) keeps the whole row NaN (degenerate), as
        # log(sum) did: excluding the argmax must not hide it
        nan_row = np.isnan(shifted).any(axis=-1)
        tail = np.where(nan_row, np.nan, tail)
        log_tail = np.where(nan_row, np.nan, log_tail)
        return shifted - np.log1p(tail)[..., None], mode, log_tail


def log_softmax_rows(logits, temperature) -> np.ndarray:
    """``log_softmax(logits / T)`` per row, float64; ``temperature`` broadcasts against rows (``[n]``).
    The normaliser is ``log1p(tail)`` (see :func:`log_softmax_with_tails`)."""
    return log_softmax_with_tails(logits, temperature)[0]


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


def _log_one_minus_exp(gap):
    """``log(1 - e^gap)`` for ``gap <= 0``: expm1 near 0, log1p far below (both accurate there)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.where(gap > -np.log(2.0), np.log(-np.expm1(gap)), np.log1p(-np.exp(gap)))


def residual_log_weights(log_scale, log_target, log_draft) -> np.ndarray:
    """``log((scale * b - q)_+)`` elementwise, from logs (``-inf`` where the residual is 0).

    ``a + log1p(-exp(log q - a))`` with ``a = log scale + log b`` keeps the residual exact where both
    probabilities underflow (at T = 1e-8 a residual can live entirely on tokens with ``b = e^-147533``,
    which is 0.0 in probability space). NaN inputs give ``-inf`` (never a winner). At a mode shared by
    the two rows, :func:`shared_mode_log_residual` is exact where this is not.
    """
    a = np.asarray(log_scale, dtype=np.float64) + np.asarray(log_target, dtype=np.float64)
    lq = np.asarray(log_draft, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        gap = np.minimum(lq - a, 0.0)
        out = np.where(lq - a < 0, a + _log_one_minus_exp(gap), -np.inf)
    return np.where(np.isnan(out), -np.inf, out)


def shared_mode_log_residual(log_scale, target_log_tail, draft_log_tail) -> np.ndarray:
    """``log((s * b_m - q_m)_+)`` at a token ``m`` that is the mode of both rows, from their log tails.

    With ``b_m = 1 / (1 + t_b)`` and ``q_m = 1 / (1 + t_q)``:
    ``s b_m - q_m = (s t_q - t_b - (1 - s)) / ((1 + t_b)(1 + t_q))``, evaluated in log space. This is
    exact where ``b_m`` and ``q_m`` both round to 1: near-one-hot rows at tiny temperatures, whose
    whole residual can sit on the mode (tails of e^-435 against e^-1110 were found by fuzzing; below
    1e-308 the probabilities cannot even tell the tails apart). ``-inf`` where the residual is 0 or an
    input is NaN. Arguments broadcast; ``log_scale`` is ``log s <= 0`` (0 for token verification).
    """
    ls = np.asarray(log_scale, dtype=np.float64)
    ltb = np.asarray(target_log_tail, dtype=np.float64)
    ltq = np.asarray(draft_log_tail, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        gained = ls + ltq  # log(s t_q)
        log_one_minus_s = np.where(ls < 0, _log_one_minus_exp(np.minimum(ls, 0.0)), -np.inf)
        lost = np.logaddexp(ltb, log_one_minus_s)  # log(t_b + 1 - s)
        gap = lost - gained
        out = np.where(gap < 0, gained + _log_one_minus_exp(np.minimum(gap, 0.0)), -np.inf)
        out = out - np.log1p(np.exp(ltb)) - np.log1p(np.exp(ltq))
    return np.where(np.isnan(out), -np.inf, out)


def shared_mode_cells(log_scale, target_mode, target_log_tail, draft_mode, draft_log_tail):
    """The residual rows whose target and draft rows share their mode: ``(row indices, mode ids,
    log((s b - q)_+) at the mode)``, to overwrite what :func:`residual_log_weights` gave there. All
    arguments are aligned per residual row (``[n]``)."""
    rows = np.flatnonzero(np.asarray(target_mode) == np.asarray(draft_mode))
    values = shared_mode_log_residual(np.asarray(log_scale, dtype=np.float64).reshape(-1)[rows],
                                      np.asarray(target_log_tail)[rows], np.asarray(draft_log_tail)[rows])
    return rows, np.asarray(target_mode)[rows], values


def residual_masses(p, target_probs, target_mode, target_log_tail, draft_probs, draft_mode, draft_log_tail):
    """Block verification's residual masses ``Z = sum_v (p b(v) - q(v))_+``, one per row, float64.

    ``p`` is ``[n]`` (each row's ``p_i``); ``target_probs`` / ``draft_probs`` are the ``[n, V]`` rows
    ``b`` and ``q``, with the modes and log-tails of :func:`log_softmax_with_tails`. At a mode shared
    by both rows the term is taken from the tails (:func:`shared_mode_cells`), exact where ``p b``
    and ``q`` both round to 1. The verifier (``reference.verify``) and the kernel tests
    (tests/kernels/test_residual_mass.py) both use this, so there is one definition of ``Z``."""
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    terms = np.maximum(p[:, None] * np.asarray(target_probs, dtype=np.float64) - draft_probs, 0.0)
    with np.errstate(divide="ignore"):
        rows, modes, values = shared_mode_cells(np.log(p), target_mode, target_log_tail, draft_mode,
                                                draft_log_tail)
    terms[rows, modes] = np.exp(values)
    return np.sum(terms, axis=1)


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
