"""Exact laws of verification (SPEC.md section 4), float64 (or exact, with ``fractions.Fraction`` models).

- ``conditional_law``: one request with a FIXED draft; the joint law of ``(tau, Y)`` as ``[g+1, V]``.
- ``output_law``: drafts sampled from the draft model; the law of the output
  ``(accepted prefix, extra token)`` by the prefix-mass recursion (SPEC.md 4c), pruned where ``A == 0``.
- ``tau_distribution``, ``expected_accepted``, ``accepted_variance``: for either form.
- ``acceptance_ceiling``: SPEC.md section 5 item 3.

A model is a callable ``prefix: tuple[int, ...] -> probabilities [V]`` (the prefix is relative to the
request's context). Conventions shared with ``reference.verify``: ``q(x) == 0`` counts as an infinite
ratio when ``b(x) > 0``; an empty residual is replaced by the target row of that position.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from reference.probs import (
    clipped_ratio_step,
    greedy_argmax,
    log_softmax_with_tails,
    point_mass_log_rows,
    rescaled_pair,
    residual_log_weights,
    shared_mode_log_residual,
    stop_probability,
)

Model = Callable[[tuple], np.ndarray]
OutputLaw = dict  # {(prefix_tuple, extra_token): probability}


def _normalised_or_fallback(log_weights: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``exp(log_weights)`` normalised, or ``fallback`` when every weight is 0 (an empty residual)."""
    top = np.max(log_weights)
    if not np.isfinite(top):
        return fallback
    weights = np.exp(log_weights - top)
    return weights / weights.sum()


def _greedy_law(target: np.ndarray, draft_ids: np.ndarray) -> np.ndarray:
    argmax, _ = greedy_argmax(target)
    g = draft_ids.size
    mismatch = np.flatnonzero(draft_ids != argmax[:g])
    tau = int(mismatch[0]) if mismatch.size else g
    law = np.zeros(target.shape)
    law[tau, argmax[tau]] = 1.0
    return law


def conditional_law(target_logits, draft_logits, draft_token_ids, temperature, method: str) -> np.ndarray:
    """Exact ``P(tau = i, Y = y)`` for one request with a fixed draft (SPEC.md 4b): float64 ``[g+1, V]``.

    ``target_logits`` ``[g+1, V]``, ``draft_logits`` ``[g, V]`` or None (point masses), raw; the
    temperature applies to both; ``temperature == 0`` gives the greedy point mass. Degenerate rows
    (NaN, an all ``-inf`` target row) give NaN entries: such requests have no law to test against.
    """
    if method not in ("token", "block"):
        raise ValueError(f"unknown method {method!r}")
    target = np.asarray(target_logits, dtype=np.float64)
    ids = np.asarray(draft_token_ids, dtype=np.int64).reshape(-1)
    g, vocab = ids.size, target.shape[1]
    if target.shape[0] != g + 1:
        raise ValueError("target_logits must have g + 1 rows")
    t = float(temperature)
    if t == 0.0:
        return _greedy_law(target, ids)
    log_b, b_mode, b_log_tail = log_softmax_with_tails(target, np.full(g + 1, t))
    b = np.exp(log_b)  # probabilities from the log-probabilities: one pass over the rows
    log_b_x = log_b[np.arange(g), ids]
    if draft_logits is None:
        q = np.zeros((g, vocab))
        q[np.arange(g), ids] = 1.0
        log_q = point_mass_log_rows(ids, vocab)
        shared_mode = np.zeros(g, dtype=bool)  # q has no tail: the generic residual is exact
    else:
        draft = np.asarray(draft_logits, dtype=np.float64)
        log_q, q_mode, q_log_tail = log_softmax_with_tails(draft, np.full(g, t))
        q = np.exp(log_q)
        shared_mode = b_mode[:g] == q_mode

    def residual(i: int, log_scale: float) -> np.ndarray:
        """log (s b_i - q_i)_+ over the row, exact at a shared mode too."""
        out = residual_log_weights(log_scale, log_b[i], log_q[i])
        if shared_mode[i]:
            out[b_mode[i]] = shared_mode_log_residual(log_scale, b_log_tail[i], q_log_tail[i])
        return out

    log_q_x = log_q[np.arange(g), ids]
    # Only the ratio b(x)/q(x) enters the acceptance law: rescaled from logs, it cannot underflow.
    b_x, q_x = rescaled_pair(log_b_x, log_q_x)

    tau_law = np.zeros(g + 1)
    scale = np.ones(g + 1)  # p_tau multiplying b in the residual (1 for token)
    if method == "token":
        a = clipped_ratio_step(1.0, b_x, q_x)
        reach = np.concatenate(([1.0], np.cumprod(a)))  # P(tau >= i)
        tau_law[:g] = reach[:g] * (1.0 - a)
        tau_law[g] = reach[g]
    else:
        p = np.ones(g + 1)
        for i in range(g):
            p[i + 1] = clipped_ratio_step(p[i], b_x[i], q_x[i])
        h = np.zeros(g + 1)  # h[i] for i = 1..g
        for i in range(1, g):
            terms = np.maximum(p[i] * b[i] - q[i], 0.0)
            if shared_mode[i]:
                with np.errstate(divide="ignore"):
                    terms[b_mode[i]] = np.exp(shared_mode_log_residual(np.log(p[i]), b_log_tail[i],
                                                                       q_log_tail[i]))
            z = terms.sum()
            h[i] = stop_probability(z, p[i])
        if g:
            h[g] = p[g]
        survive = 1.0
        for i in range(g, 0, -1):
            tau_law[i] = h[i] * survive
            survive *= 1.0 - h[i]
        tau_law[0] = survive
        scale = p

    law = np.zeros((g + 1, vocab))
    for i in range(g):
        with np.errstate(divide="ignore"):
            log_scale = np.log(scale[i])
        law[i] = tau_law[i] * _normalised_or_fallback(residual(i, log_scale), b[i])
    law[g] = tau_law[g] * b[g]
    return law


def output_law(target_model: Model, draft_model: Model, gamma: int, method: str) -> OutputLaw:
    """Exact law of ``(accepted prefix, extra token)`` with drafts sampled from ``draft_model``.

    SPEC.md 4c: ``A_0 = S_0 = 1``; token ``A_{i+1} = A_i min(M_s, M_b)``; block
    ``A_{i+1} = min(S_i M_s, A_i M_b)``; ``P(O = (x^i, y)) = A_i M_b(y) - A_{i+1}(x^i y)`` (``i < g``) and
    ``A_g M_b(y)`` at ``i == g``. Only positive entries are returned. Models returning arrays of
    ``fractions.Fraction`` give exact Fractions.
    """
    if method not in ("token", "block"):
        raise ValueError(f"unknown method {method!r}")
    law: OutputLaw = {}
    stack = [((), 1, 1)]  # (prefix, A, S)
    while stack:
        prefix, mass, draft_mass = stack.pop()
        m_b = np.asarray(target_model(prefix))
        if len(prefix) == gamma:
            emitted = mass * m_b
        else:
            m_s = np.asarray(draft_model(prefix))
            if method == "token":
                child_mass = mass * np.minimum(m_s, m_b)
            else:
                child_mass = np.minimum(draft_mass * m_s, mass * m_b)
            emitted = mass * m_b - child_mass
            for y in range(m_b.size):
                if child_mass[y] > 0:
                    stack.append((prefix + (y,), child_mass[y], draft_mass * m_s[y]))
        for y in range(m_b.size):
            if emitted[y] > 0:
                value = emitted[y]
                law[(prefix, y)] = value.item() if isinstance(value, np.generic) else value
    return law


def acceptance_ceiling(target_model: Model, draft_model: Model, gamma: int):
    """``sum_{i=1..g} sum_{x^i} min(M_s(x^i), M_b(x^i))`` over joint prefix probabilities (SPEC 5.3)."""
    total = 0
    stack = [((), 1, 1)]  # (prefix, target prefix prob, draft prefix prob)
    while stack:
        prefix, t_mass, d_mass = stack.pop()
        if len(prefix) == gamma:
            continue
        m_b, m_s = np.asarray(target_model(prefix)), np.asarray(draft_model(prefix))
        for y in range(m_b.size):
            bt, bd = t_mass * m_b[y], d_mass * m_s[y]
            if min(bt, bd) > 0:
                total += min(bt, bd)
                stack.append((prefix + (y,), bt, bd))
    return total.item() if isinstance(total, np.generic) else total


def tau_distribution(law: np.ndarray | OutputLaw, gamma: int | None = None) -> np.ndarray:
    """``P(tau = i)``, ``i = 0..g``, from a conditional law ``[g+1, V]`` or an output-law dict.

    For a dict, ``gamma`` defaults to the longest prefix present.
    """
    if isinstance(law, dict):
        g = max((len(prefix) for prefix, _ in law), default=0) if gamma is None else gamma
        out = np.zeros(g + 1)
        for (prefix, _), prob in law.items():
            out[len(prefix)] += float(prob)
        return out
    return np.asarray(law, dtype=np.float64).sum(axis=1)


def _tau_law_of(law_or_target, draft_model, gamma, method) -> np.ndarray:
    if callable(law_or_target):
        if draft_model is None or gamma is None or method is None:
            raise ValueError("the model form needs draft_model, gamma and method")
        return tau_distribution(output_law(law_or_target, draft_model, gamma, method), gamma)
    return tau_distribution(law_or_target, gamma)


def expected_accepted(law_or_target, draft_model: Model | None = None, gamma=None, method=None) -> float:
    """``E[tau]`` from a conditional law, an output law, or ``(target_model, draft_model, gamma, method)``."""
    p = _tau_law_of(law_or_target, draft_model, gamma, method)
    return float(np.dot(np.arange(p.size), p))


def accepted_variance(law_or_target, draft_model: Model | None = None, gamma=None, method=None) -> float:
    """``Var[tau]`` for the same forms as :func:`expected_accepted` (clipped at 0 against rounding)."""
    p = _tau_law_of(law_or_target, draft_model, gamma, method)
    i = np.arange(p.size)
    mean = np.dot(i, p)
    return float(max(np.dot(i * i, p) - mean * mean, 0.0))
