"""Calibrated statistics for layer 4 (SPEC.md section 7). NumPy/SciPy only; no torch.

What is here, and the contract of each piece:

- ``goodness_of_fit``: observed counts against an exact categorical law. Cells whose expected count
  is below ``min_expected`` are pooled; any observation in a cell of exact probability 0 is a certain
  failure (``impossible > 0``, p-value 0, no alpha involved). The p-value is the LARGER of Pearson's
  and the G (likelihood-ratio) chi-square p-values: both are asymptotic, and their upper tails err in
  different directions (Pearson is heavy for an excess in a small cell, G is heavy for many small
  cells), so demanding that both reject keeps the false-alarm rate at or below alpha in the far tail
  we use (alpha ~1e-8) while costing almost no power (both have the same noncentrality).
- ``detectable_tv`` / ``samples_for_tv``: power via the noncentral chi-square. For a shift of total
  variation ``d`` the Pearson noncentrality is ``n * sum (p1-p0)^2/p0 >= 4 n d^2`` (Cauchy-Schwarz,
  attained when the shift is proportional to ``p0``), so ``4 n d^2`` is the worst case over all
  alternatives at TV ``d`` on the pooled partition.
- ``mean_test``: a sample mean against its exact mean and variance with Bernstein's inequality (a
  rigorous, non-asymptotic bound that uses the exact variance), plus its detectable shift.
- ``holm``: Holm-Bonferroni over a run's p-values; ``family_wise_alpha``: the bound it guarantees.
- ``confirm_rejection``: a rejection stands only if a re-run with fresh randomness and 4x the
  samples rejects too (certain failures need no confirmation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

DEFAULT_POWER = 0.999
MIN_EXPECTED = 5.0


@dataclass
class FitResult:
    """Outcome of one goodness-of-fit test on the pooled partition."""

    n: int
    cells: int  # cells after pooling (the test has cells - 1 degrees of freedom)
    statistic: float  # Pearson chi-square on the pooled cells
    g_statistic: float
    p_value: float  # max(Pearson p, G p); 0.0 when ``impossible`` > 0
    impossible: int  # observations in cells of exact probability 0 (certain failure when > 0)
    observed: list = field(default_factory=list)  # pooled observed counts
    expected: list = field(default_factory=list)  # pooled expected counts
    labels: list = field(default_factory=list)  # pooled cell labels

    def rejects(self, alpha: float) -> bool:
        return self.impossible > 0 or self.p_value <= alpha


def pool_cells(expected: np.ndarray, min_expected: float = MIN_EXPECTED) -> np.ndarray:
    """Group index per cell: cells with expected count >= ``min_expected`` keep their own group, the
    rest are merged, smallest first, into pools whose expected count reaches ``min_expected``.

    Only cells with positive expectation are grouped (others get -1). A final pool that stays below
    the threshold is merged into the smallest full cell. Returns an int array of group ids 0..m-1.
    """
    expected = np.asarray(expected, dtype=np.float64)
    groups = np.full(expected.shape, -1, dtype=np.int64)
    positive = np.flatnonzero(expected > 0)
    if positive.size == 0:
        return groups
    order = positive[np.argsort(expected[positive], kind="stable")]
    next_group, pool_mass, pool_members = 0, 0.0, []
    for idx in order:
        if expected[idx] >= min_expected and not pool_members:
            groups[idx] = next_group
            next_group += 1
            continue
        pool_members.append(idx)
        pool_mass += expected[idx]
        if pool_mass >= min_expected:
            groups[pool_members] = next_group
            next_group += 1
            pool_members, pool_mass = [], 0.0
    if pool_members:  # a remainder below the threshold joins the most recently closed group
        groups[pool_members] = max(next_group - 1, 0)
        next_group = max(next_group, 1)
    return groups


def goodness_of_fit(
    observed: Sequence[int] | np.ndarray,
    probabilities: Sequence[float] | np.ndarray,
    labels: Sequence | None = None,
    min_expected: float = MIN_EXPECTED,
) -> FitResult:
    """Test counts ``observed`` (one per cell) against the exact law ``probabilities``.

    ``probabilities`` must be non-negative and sum to 1 (within 1e-9; it is renormalised). An
    observation in a cell with probability exactly 0 makes the result a certain failure.
    """
    obs = np.asarray(observed, dtype=np.float64).ravel()
    prob = np.asarray(probabilities, dtype=np.float64).ravel()
    if obs.shape != prob.shape:
        raise ValueError(f"observed {obs.shape} and probabilities {prob.shape} differ in shape")
    if np.any(prob < 0) or not np.all(np.isfinite(prob)):
        raise ValueError("probabilities must be finite and non-negative")
    total = prob.sum()
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"probabilities sum to {total!r}, not 1")
    prob = prob / total
    n = int(obs.sum())
    labels = list(labels) if labels is not None else list(range(obs.size))
    impossible = int(obs[prob == 0].sum())

    groups = pool_cells(prob * n, min_expected)
    m = int(groups.max()) + 1 if n > 0 and np.any(groups >= 0) else 0
    keep = groups >= 0
    pooled_obs = np.bincount(groups[keep], weights=obs[keep], minlength=m)
    pooled_exp = np.bincount(groups[keep], weights=prob[keep] * n, minlength=m)
    pooled_labels = [[] for _ in range(m)]
    for idx in np.flatnonzero(keep):
        pooled_labels[groups[idx]].append(labels[idx])
    pooled_labels = [lab[0] if len(lab) == 1 else f"pool of {len(lab)}" for lab in pooled_labels]

    if m < 2:
        pearson, g_stat, p_value = 0.0, 0.0, 1.0
    else:
        dof = m - 1
        pearson = float(np.sum((pooled_obs - pooled_exp) ** 2 / pooled_exp))
        g_stat = float(2.0 * np.sum(special.xlogy(pooled_obs, pooled_obs / pooled_exp)))
        p_value = max(float(stats.chi2.sf(pearson, dof)), float(stats.chi2.sf(g_stat, dof)))
    if impossible:
        p_value = 0.0
    return FitResult(
        n=n,
        cells=m,
        statistic=pearson,
        g_statistic=g_stat,
        p_value=p_value,
        impossible=impossible,
        observed=pooled_obs.astype(np.int64).tolist(),
        expected=pooled_exp.tolist(),
        labels=pooled_labels,
    )


def _noncentrality_for_power(cells: int, alpha: float, power: float) -> float:
    """Smallest noncentrality at which a (cells-1)-dof chi-square test at ``alpha`` has ``power``."""
    dof = max(cells - 1, 1)
    critical = stats.chi2.isf(alpha, dof)
    return float(optimize.brentq(lambda lam: stats.ncx2.sf(critical, dof, lam) - power, 1e-9, 1e9, xtol=1e-9))


def detectable_tv(n: int, cells: int, alpha: float, power: float = DEFAULT_POWER) -> float:
    """Smallest total-variation error (on the pooled partition) detected with probability >= ``power``
    by a chi-square test at level ``alpha`` with ``n`` samples and ``cells`` cells (worst case over
    the direction of the error)."""
    if n <= 0:
        return math.inf
    return math.sqrt(_noncentrality_for_power(cells, alpha, power) / (4.0 * n))


def samples_for_tv(tv: float, cells: int, alpha: float, power: float = DEFAULT_POWER) -> int:
    """Samples needed to detect total-variation error ``tv`` with probability >= ``power``."""
    return int(math.ceil(_noncentrality_for_power(cells, alpha, power) / (4.0 * tv * tv)))


@dataclass
class MeanTestResult:
    n: int
    sample_mean: float
    exact_mean: float
    statistic: float  # z = (sample_mean - exact_mean) / sqrt(variance / n), for reporting
    p_value: float  # Bernstein bound on P(|mean - exact| >= observed gap), capped at 1
    detectable_shift: float

    def rejects(self, alpha: float) -> bool:
        return self.p_value <= alpha


def _bernstein_tail(gap: float, n: int, variance: float, bound: float) -> float:
    """P(|mean of n i.i.d. - mu| >= gap) <= 2 exp(-n gap^2 / (2 var + 2 bound gap / 3)), |X - mu| <= bound."""
    if gap <= 0:
        return 1.0
    exponent = n * gap * gap / (2.0 * variance + 2.0 * bound * gap / 3.0)
    return min(1.0, 2.0 * math.exp(-exponent))


def bernstein_threshold(n: int, variance: float, bound: float, alpha: float) -> float:
    """The gap ``t`` at which the Bernstein tail bound equals ``alpha``."""
    log_term = math.log(2.0 / alpha)
    # n t^2 = L (2 var + 2 b t / 3): positive root of n t^2 - (2 b L / 3) t - 2 var L = 0.
    a, b, c = n, -2.0 * bound * log_term / 3.0, -2.0 * variance * log_term
    return (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)


def mean_shift_detectable(
    n: int, variance: float, bound: float, alpha: float, power: float = DEFAULT_POWER
) -> float:
    """Smallest |E - exact| that ``mean_test`` rejects with probability >= ``power``: the Bernstein
    threshold plus the ``power`` quantile of the sample mean's noise (normal approximation, variance
    near the exact one for shifts this small)."""
    return bernstein_threshold(n, variance, bound, alpha) + stats.norm.isf(1 - power) * math.sqrt(
        variance / n
    )


def mean_test(
    total: float,
    n: int,
    exact_mean: float,
    exact_variance: float,
    value_range: float,
    alpha: float,
    power: float = DEFAULT_POWER,
) -> MeanTestResult:
    """Compare the mean of ``n`` i.i.d. values (summing to ``total``, each within ``value_range`` of
    each other, e.g. ``g`` for tau in 0..g) with ``exact_mean``, using the exact variance."""
    mean = total / n
    gap = abs(mean - exact_mean)
    z = (mean - exact_mean) / math.sqrt(max(exact_variance, 1e-300) / n)
    p_value = _bernstein_tail(gap, n, exact_variance, value_range)
    return MeanTestResult(
        n=n,
        sample_mean=mean,
        exact_mean=exact_mean,
        statistic=float(z),
        p_value=float(p_value),
        detectable_shift=mean_shift_detectable(n, exact_variance, value_range, alpha, power),
    )


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm-Bonferroni: which hypotheses are rejected with family-wise error <= ``alpha``."""
    p = np.asarray(p_values, dtype=np.float64)
    p = np.where(np.isnan(p), 1.0, p)  # an undefined p-value never rejects
    m = p.size
    rejected = [False] * m
    for rank, idx in enumerate(np.argsort(p, kind="stable")):
        if p[idx] > alpha / (m - rank):
            break
        rejected[int(idx)] = True
    return rejected


def family_wise_alpha(alphas: Sequence[float]) -> float:
    """Bound on the probability of any false alarm among assertions run at ``alphas`` (Bonferroni;
    Holm at the same total is never weaker)."""
    return float(min(1.0, sum(alphas)))


@dataclass
class Confirmed:
    """A first outcome and, when it rejected, the confirmation run's outcome."""

    first: object
    confirmation: object | None
    failed: bool  # certain failure, or rejected twice

    @property
    def final(self) -> object:
        return self.confirmation if self.confirmation is not None else self.first


def confirm_rejection(
    run: Callable[[int, int], object], n: int, seeds: tuple[int, int], alpha: float
) -> Confirmed:
    """Run ``run(seed, n)`` (returning something with ``rejects(alpha)`` and optionally
    ``impossible``); if it rejects by chance alone (not a certain failure), run once more with the
    second, fresh seed and ``4 * n`` samples. The assertion fails only if that rejects too."""
    first = run(seeds[0], n)
    if not first.rejects(alpha):
        return Confirmed(first, None, False)
    if getattr(first, "impossible", 0):
        return Confirmed(first, None, True)
    again = run(seeds[1], 4 * n)
    return Confirmed(first, again, bool(again.rejects(alpha)))
