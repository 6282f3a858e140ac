"""Decisions depend on b(x)/q(x) only; it must survive probabilities that underflow float64.

Found by ``harness fuzz`` (tests/regressions/coupled-exactness-coupled-mismatch-num-emitted-efecaa8e.json):
at T = 3.2e-6 a draft token had log b = -772 and log q = -781, both 0.0 in float64, so an oracle in
probability space rejected a draft whose true acceptance ratio is e^9.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference.laws import conditional_law
from reference.verify import verify_batch

# Row 0: the draft token 1 has log b(1) = -800 and log q(1) = -809 (both underflow exp in float64).
TARGET = np.array([[0.0, -800.0], [0.0, 0.0]])
DRAFT = np.array([[0.0, -809.0]])


@pytest.mark.parametrize("method", ["token", "block"])
def test_conditional_law_accepts_when_ratio_exceeds_one(method):
    law = conditional_law(TARGET, DRAFT, np.array([1]), 1.0, method)
    tau = law.sum(axis=1)
    assert tau[1] == pytest.approx(1.0, abs=1e-12), tau


@pytest.mark.parametrize("method", ["token", "block"])
def test_verify_batch_accepts_when_ratio_exceeds_one(method):
    res = verify_batch(
        TARGET, DRAFT, np.array([1]), np.array([0, 1]), np.array([1.0]),
        np.array([0.999], dtype=np.float32), np.full((2, 2), 0.5, dtype=np.float32), method,
    )
    assert res.num_emitted.tolist() == [2]
    assert res.accept_margins[0] < 0


def test_ratio_below_one_still_rejects_mostly():
    """The mirror case: log b = -809, log q = -800, ratio e^-9: P(accept) = e^-9, not 1 and not 0/0."""
    target = np.array([[0.0, -809.0], [0.0, 0.0]])
    draft = np.array([[0.0, -800.0]])
    law = conditional_law(target, draft, np.array([1]), 1.0, "token")
    assert law.sum(axis=1)[1] == pytest.approx(np.exp(-9.0), rel=1e-9)


@pytest.mark.parametrize("method", ["token", "block"])
def test_residual_keeps_support_that_underflows(method):
    """Found by fuzz (tests/regressions/...-5b140ee6.json): b = q = 1.0 on token 0 in float64, and the
    residual (b - q)_+ lives on token 1 alone (b = e^-800 > q = e^-900); token 2 has b < q. A residual
    formed in probability space is empty and falls back to b, emitting token 0."""
    target = np.array([[0.0, -800.0, -2000.0], [0.0, 0.0, 0.0]])
    draft = np.array([[0.0, -900.0, -1000.0]])
    law = conditional_law(target, draft, np.array([2]), 1.0, method)
    assert law[0, 1] == pytest.approx(1.0, abs=1e-12), law
    res = verify_batch(
        target, draft, np.array([2]), np.array([0, 1]), np.array([1.0]),
        np.array([0.5], dtype=np.float32), np.full((2, 3), 0.5, dtype=np.float32), method,
    )
    assert res.output_token_ids[0].tolist() == [1, -1] and not res.used_fallback[0]
