"""The residual at a mode shared by near-one-hot target and draft rows, exact below float64's range.

There ``b_m`` and ``q_m`` both round to 1 and the residual is the difference of the rows' tails
(``reference.probs.shared_mode_log_residual`` works from their logs). Checked against exact decimal
arithmetic; the float64 probabilities of the earlier oracle lost tails below ~1e-308 (e^-709).
"""

from __future__ import annotations

from decimal import Decimal, getcontext

import numpy as np
import pytest

from reference.laws import conditional_law
from reference.probs import log_softmax_with_tails, shared_mode_log_residual
from reference.verify import verify_batch

getcontext().prec = 1400  # e^-3000 and differences of numbers near 1 at that depth


def _exact_log_residual(scale: Decimal, target_row, draft_row) -> float:
    """``log((s b_m - q_m)_+)`` at the shared mode 0 of two rows of log-weights, in decimal."""
    b = [Decimal(float(z)).exp() for z in target_row]
    q = [Decimal(float(z)).exp() for z in draft_row]
    w = scale * b[0] / sum(b) - q[0] / sum(q)
    return float(w.ln()) if w > 0 else -np.inf


# log-weights relative to the mode 0 (logits / T): (target row, draft row, 1 - scale as a decimal)
CASES = [
    ([0.0, -1110.0, -1110.0], [0.0, -435.6, -2000.0], "0"),   # draft tail below float32, above float64
    ([0.0, -1110.0, -1110.0], [0.0, -800.0, -2000.0], "0"),   # both below float64
    ([0.0, -800.5, -900.0], [0.0, -800.0, -3000.0], "0"),     # tails within a factor of 1.6
    ([0.0, -800.0, -3000.0], [0.0, -800.5, -900.0], "0"),     # the mirror: no residual
    ([0.0, -5.0, -6.0], [0.0, -3.0, -7.0], "0"),              # ordinary tails
    ([0.0, -5.0, -6.0], [0.0, -3.0, -7.0], "0.01"),           # block scale
    ([0.0, -60.0, -70.0], [0.0, -50.0, -70.0], "1e-30"),      # block: 1 - p below the tails
    ([0.0, -60.0, -70.0], [0.0, -50.0, -70.0], "1e-20"),      # ... above them: no residual
]


@pytest.mark.parametrize("target_row, draft_row, one_minus_scale", CASES)
def test_shared_mode_residual_is_exact(target_row, draft_row, one_minus_scale):
    _, b_mode, b_tail = log_softmax_with_tails(np.array([target_row]), np.ones(1))
    _, q_mode, q_tail = log_softmax_with_tails(np.array([draft_row]), np.ones(1))
    assert b_mode[0] == q_mode[0] == 0
    scale = Decimal(1) - Decimal(one_minus_scale)
    want = _exact_log_residual(scale, target_row, draft_row)
    got = float(shared_mode_log_residual(float(scale.ln()), b_tail[0], q_tail[0]))
    if want == -np.inf:
        assert got == -np.inf
    else:
        assert got == pytest.approx(want, rel=1e-12, abs=1e-9)


def test_log_tail_below_float64():
    row = np.array([[0.0, -1110.0, -1110.0, -np.inf]])
    _, mode, log_tail = log_softmax_with_tails(row, np.ones(1))
    assert mode[0] == 0 and log_tail[0] == pytest.approx(-1110.0 + np.log(2.0), abs=1e-12)
    _, _, lone = log_softmax_with_tails(np.array([[0.0, -np.inf]]), np.ones(1))
    assert lone[0] == -np.inf


@pytest.mark.parametrize("method", ["token", "block"])
def test_verifier_and_law_emit_the_mode(method):
    """Draft token 1 (b/q = e^-310) is rejected; the residual is e^-800 on the mode 0 against
    e^-1110 on token 2, and the old probability-space normaliser (tails below 1e-308 read as 0)
    emitted token 2."""
    target = np.array([[0.0, -1110.0, -1110.0], [0.0, 0.0, 0.0]])
    draft = np.array([[0.0, -800.0, -2000.0]])
    law = conditional_law(target, draft, np.array([1]), 1.0, method)
    assert law[0, 0] == pytest.approx(1.0, abs=1e-12), law
    res = verify_batch(target, draft, np.array([1]), np.array([0, 1]), np.array([1.0]),
                       np.array([0.5], dtype=np.float32), np.full((2, 3), 0.5, dtype=np.float32), method)
    assert res.output_token_ids[0].tolist() == [0, -1] and not res.used_fallback[0]
    assert res.sample_margins[0] > 300.0


def test_block_stop_probability_at_a_shared_mode_is_exact():
    """Block, g = 2: p_1 = 1/(1 + 2^-51), so 1 - p_1 is 4 float64 steps below 1 (float64 cannot hold
    p_1 closer to 1 than its step: the oracle's limit), and row 1 shares its mode with tails 6e-16
    (draft) and e^-50 (target): Z_2 = p_1 b_m - q_m ~ 1.6e-16 lives on the mode, where b_m and q_m
    round to within a step of 1. h_1 = Z_2 / (Z_2 + 1 - p_1) ~ 0.265; taking Z_2 from the rounded
    probabilities gives 0.2 or 0.33. Checked against decimal arithmetic."""
    a, c = 2.0**-51, 6e-16
    ninf = -np.inf
    target = np.array([[0.0, np.log(a), ninf, ninf], [0.0, ninf, -50.0, ninf], [0.0, 0.0, 0.0, 0.0]])
    draft = np.array([[0.0, ninf, ninf, ninf], [0.0, np.log(c), -40.0, ninf]])
    ids = np.array([0, 2])
    exp = lambda row: [Decimal(float(z)).exp() if np.isfinite(z) else Decimal(0) for z in row]
    norm = lambda row: [w / sum(exp(row)) for w in exp(row)]
    b0, q0, b1, q1 = norm(target[0]), norm(draft[0]), norm(target[1]), norm(draft[1])
    p1 = min(b0[0] / q0[0], Decimal(1))
    z2 = sum(max(p1 * bv - qv, Decimal(0)) for bv, qv in zip(b1, q1, strict=True))
    h1 = z2 / (z2 + 1 - p1)
    h2 = min(p1 * b1[2] / q1[2], Decimal(1))
    law = conditional_law(target, draft, ids, 1.0, "block").sum(axis=1)
    assert float(h1) == pytest.approx(0.265, abs=0.01)
    assert law[1] == pytest.approx(float(h1 * (1 - h2)), rel=1e-6)
    assert law[2] == pytest.approx(float(h2), rel=1e-6)
    for eta, want in ((float(h1) - 0.01, 2), (float(h1) + 0.01, 1)):  # tau = 1 iff eta_1 <= h_1
        res = verify_batch(target, draft, ids, np.array([0, 2]), np.array([1.0]),
                           np.array([eta, 0.5], dtype=np.float32), np.full((3, 4), 0.5, dtype=np.float32),
                           "block")
        assert res.num_emitted[0] == want, (eta, res.num_emitted)


def test_residual_masses_sum_the_positive_parts_and_keep_a_shared_mode():
    """``residual_masses`` is ``sum (p b - q)_+`` per row; at a mode shared by near-one-hot rows, where
    that float64 difference is 0, it holds the tails' exact difference instead."""
    from reference.probs import residual_masses

    rng = np.random.default_rng(20261202)
    target, draft = rng.normal(size=(5, 40)), rng.normal(size=(5, 40))
    p = rng.uniform(0.1, 1.0, size=5)
    logb, b_mode, b_tail = log_softmax_with_tails(target, np.ones(5))
    logq, q_mode, q_tail = log_softmax_with_tails(draft, np.ones(5))
    naive = np.sum(np.maximum(p[:, None] * np.exp(logb) - np.exp(logq), 0.0), axis=1)
    got = residual_masses(p, np.exp(logb), b_mode, b_tail, np.exp(logq), q_mode, q_tail)
    np.testing.assert_allclose(got, naive, rtol=1e-12)
    assert np.all(got > 0)

    light, heavy = np.array([[0.0, -60.0, -70.0]]), np.array([[0.0, -50.0, -70.0]])  # tails e^-60, e^-50
    logb, b_mode, b_tail = log_softmax_with_tails(light, np.ones(1))  # target: b(mode) = 1 - ~e^-60
    logq, q_mode, q_tail = log_softmax_with_tails(heavy, np.ones(1))  # draft: q(mode) = 1 - ~e^-50
    linear = np.maximum(np.exp(logb) - np.exp(logq), 0.0)[0]
    assert linear[0] == 0.0  # both round to 1: float64 loses the mode's share, ~e^-50
    z = residual_masses(np.ones(1), np.exp(logb), b_mode, b_tail, np.exp(logq), q_mode, q_tail)
    mode_share = np.exp(_exact_log_residual(Decimal(1), light[0], heavy[0]))
    assert mode_share == pytest.approx(np.exp(-50.0), rel=1e-4)
    assert z[0] == pytest.approx(linear[1:].sum() + mode_share, rel=1e-9)
