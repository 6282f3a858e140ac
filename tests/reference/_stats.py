"""Goodness-of-fit helpers for the reference tests (SPEC.md section 7).

Pearson chi-square with pooling of cells whose expected count is below 5, a certain failure for any
observation in a cell of exact probability 0, and the power statement: the smallest total-variation
error detected with probability >= 0.999 at the test's sample size (noncentral chi-square with the
worst-case noncentrality ``4 n tv**2``, the minimum of ``n * sum d_i**2 / p_i`` over perturbations of
total variation ``tv``, by Cauchy-Schwarz).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

POWER = 0.999


@dataclass
class GoodnessOfFit:
    n: int
    cells: int
    dof: int
    statistic: float
    p_value: float
    alpha: float
    detectable_tv: float
    impossible_observations: int

    @property
    def rejected(self) -> bool:
        return self.impossible_observations > 0 or self.p_value < self.alpha

    def describe(self) -> str:
        return (
            f"n={self.n} cells={self.cells} dof={self.dof} chi2={self.statistic:.1f} p={self.p_value:.3g} "
            f"alpha={self.alpha:g} power={POWER} at TV>={self.detectable_tv:.4f} "
            f"impossible={self.impossible_observations}"
        )


def detectable_tv(n: int, dof: int, alpha: float, power: float = POWER) -> float:
    """Smallest TV distance the chi-square test detects with probability ``power``."""
    if dof < 1:
        return float("inf")
    critical = stats.chi2.isf(alpha, dof)
    miss = lambda tv: stats.ncx2.cdf(critical, dof, 4.0 * n * tv * tv) - (1.0 - power)
    return float(optimize.brentq(miss, 1e-9, 1.0)) if miss(1.0) < 0 else float("inf")


def chi_square_test(observed, expected_probs, alpha: float, group_of_cell=None) -> GoodnessOfFit:
    """Pearson test of counts against exact probabilities (flattened).

    ``expected_probs`` are expected FRACTIONS of the total count. ``group_of_cell`` (optional, one label
    per cell) marks independent multinomials concatenated, each normalised to its own count: one
    degree of freedom is removed per group that keeps a cell outside the pool (conservative: the
    pool's own constraint is not subtracted), instead of one in all.
    """
    obs = np.asarray(observed, dtype=np.float64).ravel()
    n = int(obs.sum())
    exp = np.asarray(expected_probs, dtype=np.float64).ravel() * n
    groups = (
        np.zeros(obs.size, dtype=np.int64) if group_of_cell is None else np.asarray(group_of_cell).ravel()
    )
    impossible = int(obs[exp == 0].sum())
    keep = exp > 0
    obs, exp, groups = obs[keep], exp[keep], groups[keep]
    small = exp < 5
    constraints = np.unique(groups[~small]).size if (~small).any() else 1
    if small.any():
        pooled_obs, pooled_exp = obs[small].sum(), exp[small].sum()
        obs, exp = np.append(obs[~small], pooled_obs), np.append(exp[~small], pooled_exp)
        if pooled_exp < 5 and obs.size > 1:  # merge the pooled cell into the smallest other cell
            j = int(np.argmin(exp[:-1]))
            obs[j] += obs[-1]
            exp[j] += exp[-1]
            obs, exp = obs[:-1], exp[:-1]
    dof = max(obs.size - constraints, 1)
    statistic = float(np.sum((obs - exp) ** 2 / exp))
    p_value = float(stats.chi2.sf(statistic, dof))
    return GoodnessOfFit(
        n, int(obs.size), dof, statistic, p_value, alpha, detectable_tv(n, dof, alpha), impossible
    )
