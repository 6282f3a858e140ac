"""harness.judging.stats: calibration (false alarms <= alpha under H0), power (the stated TV is detected),
pooling, certain failures, Holm, Bernstein mean test, confirmation.

Everything is driven by fixed seeds; the simulated tests use loose alphas (1e-2, 1e-3) so that their
rates can be measured, and their own pass/fail margins are binomial bounds with tail < 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from harness.judging import stats

RUNS = 3000


def _binomial_upper(k_expected_rate: float, runs: int, tail: float = 1e-6) -> int:
    """Largest count a Binomial(runs, rate) exceeds with probability < ``tail``."""
    return int(sps.binom.isf(tail, runs, k_expected_rate))


@pytest.mark.parametrize(
    "law_name, probabilities",
    [
        ("uniform8", np.full(8, 1 / 8)),
        ("geometric40", 0.8 ** np.arange(40) / (0.8 ** np.arange(40)).sum()),  # many pooled tail cells
        ("zipf200", (1 / np.arange(1, 201)) / (1 / np.arange(1, 201)).sum()),
    ],
)
@pytest.mark.parametrize("alpha", [1e-2, 1e-3])
def test_false_alarm_rate_is_at_most_alpha(law_name, probabilities, alpha):
    rng = np.random.default_rng(20261129)
    n = 2000
    counts = rng.multinomial(n, probabilities, size=RUNS)
    rejections = sum(stats.goodness_of_fit(c, probabilities).rejects(alpha) for c in counts)
    assert rejections <= _binomial_upper(alpha, RUNS), (law_name, rejections, RUNS * alpha)


def _shifted(p0: np.ndarray, tv: float) -> np.ndarray:
    """Worst-case alternative at total variation ``tv``: shift proportional to p0, + on half the mass."""
    signs = np.where(np.arange(p0.size) % 2 == 0, 1.0, -1.0)
    return p0 * (1 + 2 * tv * signs)  # p0 uniform with an even number of cells: sums to 1, TV = tv


@pytest.mark.parametrize("cells, tv, alpha", [(8, 0.05, 1e-6), (32, 0.05, 2.5e-8), (64, 0.1, 1e-6)])
def test_power_detects_the_stated_tv(cells, tv, alpha):
    p0 = np.full(cells, 1 / cells)
    n = stats.samples_for_tv(tv, cells, alpha)
    assert stats.detectable_tv(n, cells, alpha) <= tv + 1e-9
    p1 = _shifted(p0, tv)
    assert abs(0.5 * np.abs(p1 - p0).sum() - tv) < 1e-12
    rng = np.random.default_rng(7)
    runs = 400
    counts = rng.multinomial(n, p1, size=runs)
    detected = sum(stats.goodness_of_fit(c, p0).rejects(alpha) for c in counts)
    # Power 0.999 means ~0.4 misses in 400; 6 misses would have probability < 1e-6.
    assert detected >= runs - 6, (detected, runs, n)


def test_power_guide_of_spec_section7():
    # SPEC.md 7: 32 cells at TV 0.01 need ~3e5 samples; 1024 cells ~1e6 (alpha 1e-6, power 0.999).
    assert 2.5e5 < stats.samples_for_tv(0.01, 32, 1e-6) < 3.5e5
    assert 0.8e6 < stats.samples_for_tv(0.01, 1024, 1e-6) < 1.3e6


def test_observation_in_zero_probability_cell_is_a_certain_failure():
    p = np.array([0.5, 0.5, 0.0])
    result = stats.goodness_of_fit([500, 499, 1], p)
    assert result.impossible == 1 and result.p_value == 0.0 and result.rejects(1e-300)
    assert not stats.goodness_of_fit([500, 500, 0], p).rejects(1e-6)


def test_pooling_merges_small_cells_only():
    expected = np.array([100.0, 2.0, 1.0, 50.0, 3.0, 0.0])
    groups = stats.pool_cells(expected, 5.0)
    assert groups[5] == -1  # zero-probability cells are never pooled
    assert groups[1] == groups[2] == groups[4]  # 1 + 2 + 3 = 6 >= 5
    assert len({groups[0], groups[3], groups[1]}) == 3
    fit = stats.goodness_of_fit([100, 2, 1, 50, 3, 0], expected / expected.sum())
    assert fit.cells == 3 and min(fit.expected) >= 5.0


def test_pooling_remainder_joins_a_group():
    groups = stats.pool_cells(np.array([1.0, 10.0, 10.0]), 5.0)
    assert groups.min() >= 0 and len(set(groups.tolist())) == 2


def test_gross_mismatch_is_rejected_and_exact_match_is_not():
    p = np.array([0.25, 0.25, 0.5])
    assert stats.goodness_of_fit([2500, 2500, 5000], p).p_value == 1.0
    assert stats.goodness_of_fit([3000, 2500, 4500], p).rejects(1e-6)


def test_holm():
    assert stats.holm([0.001, 0.02, 0.03, 0.5], 0.05) == [True, False, False, False]
    assert stats.holm([0.01, 0.012, 0.013], 0.05) == [True, True, True]
    assert stats.holm([1e-9, float("nan")], 0.05) == [True, False]  # an undefined p-value never rejects
    assert stats.family_wise_alpha([1e-7] * 10) == pytest.approx(1e-6)


def test_mean_test_calibration_and_power():
    rng = np.random.default_rng(11)
    g, probs = 3, np.array([0.1, 0.2, 0.3, 0.4])
    mean = float((np.arange(g + 1) * probs).sum())
    var = float((np.arange(g + 1) ** 2 * probs).sum() - mean**2)
    n, alpha = 4000, 1e-2
    draws = rng.choice(g + 1, size=(RUNS, n), p=probs)
    false_alarms = sum(stats.mean_test(float(d.sum()), n, mean, var, g, alpha).rejects(alpha) for d in draws)
    assert false_alarms <= _binomial_upper(alpha, RUNS)
    shift = stats.mean_shift_detectable(n, var, g, alpha)
    shifted = probs + np.array([-1, 0, 0, 1]) * shift / 3  # mean moves by exactly `shift`
    draws = rng.choice(g + 1, size=(400, n), p=shifted)
    detected = sum(stats.mean_test(float(d.sum()), n, mean, var, g, alpha).rejects(alpha) for d in draws)
    assert detected >= 394


class _Outcome:
    def __init__(self, reject: bool, impossible: int = 0):
        self.reject, self.impossible = reject, impossible

    def rejects(self, alpha):
        return self.reject


def test_confirmation_needs_two_rejections_with_fresh_seed_and_4x_samples():
    calls = []

    def run(seed, n):
        calls.append((seed, n))
        return _Outcome(reject=(seed == 1))

    out = stats.confirm_rejection(run, 100, (1, 2), 1e-6)
    assert calls == [(1, 100), (2, 400)] and not out.failed
    calls.clear()
    assert stats.confirm_rejection(lambda s, n: _Outcome(True), 10, (1, 2), 1e-6).failed
    certain = stats.confirm_rejection(
        lambda s, n: calls.append(s) or _Outcome(True, impossible=1), 10, (1, 2), 1e-6
    )
    assert certain.failed and calls == [1]
