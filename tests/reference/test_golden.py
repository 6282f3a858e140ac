"""The golden toy example of SPEC.md section 5 (Sun et al.), exactly, with Fractions."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from reference import laws
from tests.reference._models import ConstantModel, marginal_from_conditional, max_abs_difference

TARGET = ConstantModel(np.array([F(1, 3), F(2, 3)], dtype=object))
DRAFT = ConstantModel(np.array([F(2, 3), F(1, 3)], dtype=object))
TARGET_F = ConstantModel([1 / 3, 2 / 3])
DRAFT_F = ConstantModel([2 / 3, 1 / 3])
A, B = 0, 1


def _named(law: dict) -> dict:
    return {"".join("ab"[x] for x in prefix) + "|" + "ab"[y]: p for (prefix, y), p in law.items()}


GOLDEN = {
    "block": {
        "|b": F(1, 3),
        "b|b": F(1, 9),
        "aa|a": F(1, 27),
        "aa|b": F(2, 27),
        "ab|a": F(2, 27),
        "ab|b": F(4, 27),
        "ba|a": F(1, 27),
        "ba|b": F(2, 27),
        "bb|a": F(1, 27),
        "bb|b": F(2, 27),
    },
    "token": {
        "|b": F(1, 3),
        "a|b": F(1, 9),
        "b|b": F(1, 9),
        **{f"{d}|{y}": F(1 if y == "a" else 2, 27) for d in ("aa", "ab", "ba", "bb") for y in "ab"},
    },
}
TAU = {"token": [F(1, 3), F(2, 9), F(4, 9)], "block": [F(1, 3), F(1, 9), F(5, 9)]}
MEAN = {"token": F(10, 9), "block": F(11, 9)}


@pytest.mark.parametrize("method", ["token", "block"])
def test_output_law_is_exactly_the_golden_table(method):
    law = laws.output_law(TARGET, DRAFT, 2, method)
    assert _named(law) == GOLDEN[method]
    assert [F(x).limit_denominator(1000) for x in laws.tau_distribution(law, 2)] == TAU[method]
    assert abs(laws.expected_accepted(law) - float(MEAN[method])) < 1e-15
    assert abs(laws.expected_accepted(TARGET_F, DRAFT_F, 2, method) - float(MEAN[method])) < 1e-15


def test_ceiling_is_twelve_ninths():
    assert laws.acceptance_ceiling(TARGET, DRAFT, 2) == F(12, 9)


@pytest.mark.parametrize("method", ["token", "block"])
def test_conditional_laws_over_all_drafts_reproduce_the_golden_table(method):
    law = marginal_from_conditional(TARGET_F, DRAFT_F, 2, 2, method)
    golden = {k: float(v) for k, v in _named(laws.output_law(TARGET, DRAFT, 2, method)).items()}
    got = _named(law)
    assert set(k for k, v in got.items() if v > 1e-15) == set(golden)
    assert max(abs(got.get(k, 0) - golden[k]) for k in golden) < 1e-15


def test_draft_aa_counterexample_block_loses_for_one_fixed_draft():
    """SPEC.md 5.2: for the fixed draft "aa", E_block = 1/2 < E_token = 3/4 (no per-draft dominance)."""
    target = np.log([[1 / 3, 2 / 3]] * 3)
    draft = np.log([[2 / 3, 1 / 3]] * 2)
    token = laws.conditional_law(target, draft, [A, A], 1.0, "token")
    block = laws.conditional_law(target, draft, [A, A], 1.0, "block")
    assert abs(laws.expected_accepted(token) - 0.75) < 1e-15
    assert abs(laws.expected_accepted(block) - 0.5) < 1e-15
    np.testing.assert_allclose(laws.tau_distribution(block), [0.75, 0.0, 0.25], atol=1e-15)
    # Y given tau = 0 is the block residual norm((b - q)_+) = b (all mass on "b").
    np.testing.assert_allclose(block[0], [0.0, 0.75], atol=1e-15)


def test_variance_matches_the_golden_tau_law():
    for method in ("token", "block"):
        p = [float(x) for x in TAU[method]]
        mean = sum(i * x for i, x in enumerate(p))
        expected = sum(i * i * x for i, x in enumerate(p)) - mean**2
        assert abs(laws.accepted_variance(TARGET_F, DRAFT_F, 2, method) - expected) < 1e-15


def test_clipping_only_at_the_end_is_detected(monkeypatch):
    """Broken variant: p_i = prod r (no per-step clip), clipped once at the end."""
    unclipped = lambda p, b, q: np.asarray(p, dtype=np.float64) * b / q
    monkeypatch.setattr(laws, "clipped_ratio_step", unclipped)
    original_stop = laws.stop_probability
    monkeypatch.setattr(laws, "stop_probability", lambda z, p: original_stop(z, np.minimum(p, 1.0)))
    broken = marginal_from_conditional(
        TARGET_F, DRAFT_F, 2, 2, "block", law_fn=lambda *a: np.clip(laws.conditional_law(*a), 0, None)
    )
    golden = {k: float(v) for k, v in laws.output_law(TARGET, DRAFT, 2, "block").items()}
    assert max_abs_difference(broken, golden) > 0.01


def test_token_recursion_used_for_block_is_detected():
    """Broken variant: the block law computed with the token prefix recursion misses the golden table."""
    assert _named(laws.output_law(TARGET, DRAFT, 2, "token")) != GOLDEN["block"]
