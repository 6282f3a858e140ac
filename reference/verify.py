"""The decision-by-decision oracle: token, block and greedy verification of a whole batch, float64.

``verify_batch`` replays exactly what a kernel decides given the same uniforms (docs/interfaces.md
sections 1-2), for a batch in the DESIGN.md layout: request ``r`` owns draft slots
``cu[r]:cu[r+1]`` and target rows ``cu[r] + r .. cu[r+1] + r``. Greedy rows (``T == 0``) and sampled
rows mix freely; ``draft_logits=None`` means point-mass drafts. It is vectorised over requests (the
only Python loop runs over draft slots, at most ``max_k`` times).

Degenerate rows (NaN anywhere, an all ``-inf`` target row, ``q(x) == 0``) never produce an id outside
``[0, V)``; which id they produce is unspecified (interfaces.md section 3). When a residual has no
positive weight, the target row of that position is sampled instead with the same uniforms; if that
is empty too, id 0 is emitted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.probs import (
    clipped_ratio_step,
    effective_temperature,
    greedy_argmax,
    log_softmax_with_tails,
    point_mass_log_rows,
    rescaled_pair,
    residual_log_weights,
    residual_masses,
    shared_mode_cells,
    stop_probability,
)
from reference.rng import exponential_from_uniform

METHODS = ("token", "block")


@dataclass
class ReferenceResult:
    """What the oracle decided, with every decision margin.

    - ``output_token_ids`` ``[R, max_k + 1]`` int64: accepted drafts, then the correction/bonus, then -1.
    - ``num_emitted`` ``[R]`` int32 in ``[1, k_r + 1]`` (``num_emitted - 1`` drafts were accepted).
    - ``logprobs`` ``[R, max_k + 1]`` float64 or None: log-probability of each emitted token under the
      temperature-scaled target row it came from (raw log-softmax for greedy rows); padding 0.0.
    - ``accept_margins`` ``[D]``: token ``u*q(x) - b(x)`` with ``b(x), q(x)`` both divided by their
      maximum (accept iff < 0; scale-free, so it is ``u - b(x)/q(x)`` whenever ``b(x) <= q(x)``);
      block ``eta_i - h_i`` (passes iff <= 0; every slot is evaluated); greedy: top-2 logit gap of the
      slot's target row.
      NaN where a slot was not evaluated (token slots after the first rejection).
    - ``sample_margins`` ``[R]``: top-1 minus top-2 score ``log w - log E`` of the emitted token's race
      (``inf`` with a single candidate); greedy: top-2 logit gap of the emitting row.
    - ``used_fallback`` ``[R]`` bool: the residual was empty and the target row was sampled instead.
    """

    output_token_ids: np.ndarray
    num_emitted: np.ndarray
    logprobs: np.ndarray | None
    accept_margins: np.ndarray
    sample_margins: np.ndarray
    used_fallback: np.ndarray


def _check_inputs(target, draft, ids, cu, temperature, u_accept, u_sample, method) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if target.ndim != 2:
        raise ValueError("target_logits must be [num_logits, V]")
    num_reqs, num_drafts = cu.size - 1, ids.size
    if cu.size < 1 or cu[0] != 0 or np.any(np.diff(cu) < 0) or cu[-1] != num_drafts:
        raise ValueError("cu_num_draft_tokens must start at 0, be non-decreasing and end at num_draft_total")
    if target.shape[0] != num_drafts + num_reqs:
        raise ValueError(f"target_logits has {target.shape[0]} rows, expected {num_drafts + num_reqs}")
    if draft is not None and draft.shape != (num_drafts, target.shape[1]):
        raise ValueError(f"draft_logits must be [{num_drafts}, {target.shape[1]}], got {draft.shape}")
    if temperature.shape != (num_reqs,) or np.any(~(temperature >= 0)):
        raise ValueError("temperature must be [num_reqs] and >= 0")
    if np.any((ids < 0) | (ids >= target.shape[1])):
        raise ValueError("draft_token_ids must lie in [0, V)")
    if u_accept.shape != (num_drafts,) or u_sample.shape != target.shape:
        raise ValueError("accept_uniforms must be [num_draft_total], sampling_uniforms [num_logits, V]")


def _padded(values: np.ndarray, slot_req: np.ndarray, slot_j: np.ndarray, shape, fill) -> np.ndarray:
    out = np.full(shape, fill, dtype=np.result_type(values, np.asarray(fill)))
    out[slot_req, slot_j] = values
    return out


def _race(log_weights: np.ndarray, exponentials: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exponential race ``argmax(log w - log E)`` per row: (ids, top-2 score gap, row had positive mass).

    Takes LOG weights so that residuals living on underflowing probabilities keep their support.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        clean = np.where(np.isnan(log_weights) | (log_weights == np.inf), -np.inf, log_weights)
        scores = clean - np.log(exponentials)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    ids = np.argmax(scores, axis=1)  # first maximum: lowest index on ties
    has_mass = np.any(clean > -np.inf, axis=1)
    if scores.shape[1] > 1:
        top2 = -np.partition(-scores, 1, axis=1)[:, :2]
        with np.errstate(invalid="ignore"):
            gap = top2[:, 0] - top2[:, 1]
    else:
        gap = np.full(ids.shape, np.inf)
    return ids, gap, has_mass


def leading_passes(pass_pad: np.ndarray) -> np.ndarray:
    """Token (and greedy) rule: the number of slots passed before the first failure.

    ``pass_pad`` is ``[R, max_k + 1]`` with padding slots (``j >= k_r``) False.
    """
    return np.argmax(~pass_pad, axis=1)


def passes_up_to_last(pass_pad: np.ndarray) -> np.ndarray:
    """Block rule ``tau = max{i : eta_i <= h_i}``: one past the LAST passing slot (scan all, never break)."""
    last = pass_pad.shape[1] - np.argmax(pass_pad[:, ::-1], axis=1)
    return np.where(pass_pad.any(axis=1), last, 0)


def residual_scale(method: str, p_tau: np.ndarray) -> np.ndarray:
    """Factor on ``b`` in the residual ``(scale * b - q)_+``: 1 for token, ``p_tau`` for block."""
    return np.ones((p_tau.size, 1)) if method == "token" else p_tau[:, None]


def verify_batch(
    target_logits,
    draft_logits,
    draft_token_ids,
    cu_num_draft_tokens,
    temperature,
    accept_uniforms,
    sampling_uniforms,
    method: str,
    want_logprobs: bool = False,
    *,
    residual_mass_scale: float = 1.0,
) -> ReferenceResult:
    """Verify a batch with the given uniforms (shapes as in ``reference.rng``); see the module docstring.

    Logits of any float dtype are upcast to float64; uniforms are used as given (float32 from
    ``reference.rng`` or any values in (0, 1)). Raises ValueError on malformed inputs.

    ``residual_mass_scale`` multiplies every block residual mass ``Z_{i+1}`` before ``h_i`` is
    formed. 1 (the default) is the specification; another value gives the decisions of a kernel
    whose ``Z`` is off by that factor, which is how a crafted case is shown to catch that bug
    (tests/harness/test_crafted.py). Token verification ignores it.
    """
    target = np.asarray(target_logits, dtype=np.float64)
    draft = None if draft_logits is None else np.asarray(draft_logits, dtype=np.float64)
    ids = np.asarray(draft_token_ids, dtype=np.int64).reshape(-1)
    cu = np.asarray(cu_num_draft_tokens, dtype=np.int64).reshape(-1)
    temp = np.asarray(temperature, dtype=np.float64).reshape(-1)
    u_accept = np.asarray(accept_uniforms, dtype=np.float64).reshape(-1)
    u_sample = np.asarray(sampling_uniforms)
    _check_inputs(target, draft, ids, cu, temp, u_accept, u_sample, method)

    num_reqs, vocab = cu.size - 1, target.shape[1]
    lengths = np.diff(cu)
    width = int(lengths.max()) if num_reqs else 0
    slot_req = np.repeat(np.arange(num_reqs), lengths)
    slot_j = np.arange(ids.size) - cu[slot_req]
    slot_row = np.arange(ids.size) + slot_req  # target row judging each draft slot
    row_req = np.repeat(np.arange(num_reqs), lengths + 1)
    greedy = temp == 0.0

    row_temp = effective_temperature(temp)[row_req]
    logb, b_mode, b_log_tail = log_softmax_with_tails(target, row_temp)
    b = np.exp(logb)  # one pass over the rows: probabilities from the log-probabilities
    b_x = b[slot_row, ids]
    if draft is None:
        log_q = point_mass_log_rows(ids, vocab)
    else:
        log_q, q_mode, q_log_tail = log_softmax_with_tails(draft, effective_temperature(temp)[slot_req])
        q = np.exp(log_q)
    log_q_x = log_q[np.arange(ids.size), ids]
    # Decisions use only b(x)/q(x): take it from the logs so tiny temperatures cannot underflow it.
    b_ratio, q_ratio = rescaled_pair(logb[slot_row, ids], log_q_x)

    # Per-slot decisions, padded to [R, width]; slots at j >= k_r never pass.
    u = u_accept
    p_before = np.ones(ids.size)  # p_{j} entering slot j (block); 1 for token
    if method == "token":
        with np.errstate(invalid="ignore"):
            margins = u * q_ratio - b_ratio
            passes = margins < 0
    else:
        bx_pad = _padded(b_ratio, slot_req, slot_j, (num_reqs, width), 0.0)
        qx_pad = _padded(q_ratio, slot_req, slot_j, (num_reqs, width), 1.0)
        p = np.ones((num_reqs, width + 1))
        for j in range(width):
            p[:, j + 1] = clipped_ratio_step(p[:, j], bx_pad[:, j], qx_pad[:, j])
        p_before = p[slot_req, slot_j]
        if draft is None:
            z = p_before * (1.0 - b_x)
        else:
            z = residual_masses(p_before, b[slot_row], b_mode[slot_row], b_log_tail[slot_row], q, q_mode,
                                q_log_tail)
        z = z * residual_mass_scale
        z_pad = _padded(z, slot_req, slot_j, (num_reqs, width + 1), 0.0)
        is_last = slot_j == lengths[slot_req] - 1
        p_after = p[slot_req, slot_j + 1]
        h = np.where(is_last, p_after, stop_probability(z_pad[slot_req, slot_j + 1], p_after))
        with np.errstate(invalid="ignore"):
            margins = u - h
            passes = margins <= 0

    # Greedy requests: a slot passes iff the draft equals the lowest-index argmax of its raw row.
    slot_greedy = greedy[slot_req]
    if greedy.any():
        row_argmax, row_gap = greedy_argmax(target)
        passes = np.where(slot_greedy, ids == row_argmax[slot_row], passes)
        margins = np.where(slot_greedy, row_gap[slot_row], margins)

    pass_pad = _padded(passes, slot_req, slot_j, (num_reqs, width + 1), False)
    leading = leading_passes(pass_pad)
    if method == "token":
        num_accepted = leading
        evaluated = slot_j <= num_accepted[slot_req]
    else:
        num_accepted = np.where(greedy, leading, passes_up_to_last(pass_pad))
        evaluated = np.where(slot_greedy, slot_j <= num_accepted[slot_req], True)
    accept_margins = np.where(evaluated, margins, np.nan)

    # The emitted token: bonus from row k_r, else the residual of the rejected slot.
    emit_row = cu[:-1] + np.arange(num_reqs) + num_accepted
    is_bonus = num_accepted == lengths
    reject_slot = np.minimum(cu[:-1] + num_accepted, max(ids.size - 1, 0))
    log_weights = logb[emit_row].copy()
    if ids.size:
        rejected = ~is_bonus & ~greedy
        rs = reject_slot[rejected]
        with np.errstate(divide="ignore"):
            log_scale = np.log(residual_scale(method, p_before[rs]))
        residual = residual_log_weights(log_scale, log_weights[rejected], log_q[rs])
        if draft is not None:
            cells = shared_mode_cells(log_scale, b_mode[emit_row[rejected]], b_log_tail[emit_row[rejected]],
                                      q_mode[rs], q_log_tail[rs])
            residual[cells[0], cells[1]] = cells[2]
        log_weights[rejected] = residual
    exps = exponential_from_uniform(u_sample[emit_row])
    emitted, sample_gap, has_mass = _race(log_weights, exps)
    fallback = ~has_mass & ~greedy
    if fallback.any():
        emitted[fallback], sample_gap[fallback], _ = _race(logb[emit_row[fallback]], exps[fallback])
    if greedy.any():
        emitted = np.where(greedy, row_argmax[emit_row], emitted)
        sample_gap = np.where(greedy, row_gap[emit_row], sample_gap)

    out = np.full((num_reqs, width + 1), -1, dtype=np.int64)
    keep = slot_j < num_accepted[slot_req]
    out[slot_req[keep], slot_j[keep]] = ids[keep]
    out[np.arange(num_reqs), num_accepted] = emitted

    logprobs = None
    if want_logprobs:
        logprobs = np.zeros((num_reqs, width + 1))
        logprobs[slot_req[keep], slot_j[keep]] = logb[slot_row[keep], ids[keep]]
        logprobs[np.arange(num_reqs), num_accepted] = logb[emit_row, emitted]

    return ReferenceResult(
        output_token_ids=out,
        num_emitted=(num_accepted + 1).astype(np.int32),
        logprobs=logprobs,
        accept_margins=accept_margins,
        sample_margins=sample_gap,
        used_fallback=fallback,
    )
