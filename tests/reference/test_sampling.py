"""The fast inverse-CDF samplers reproduce their exact laws (chi-square, alpha 1e-6, power printed)."""

from __future__ import annotations

import numpy as np
import pytest

from reference import laws, sampling
from tests.reference._models import TableModel
from tests.reference._stats import chi_square_test

ALPHA = 1e-6  # 4 assertions here: family-wise <= 4e-6


def _request(seed):
    gen = np.random.default_rng(seed)
    print(f"request seed={seed}")
    return gen.normal(size=(5, 12)) * 2, gen.normal(size=(4, 12)) * 2, gen.integers(0, 12, 4)


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["token", "block"])
def test_request_sampler_matches_conditional_law(method):
    target, draft, ids = _request(3)
    sampler = sampling.RequestSampler(target, draft, ids, 0.9, method)
    tau, y = sampler.sample(400_000, np.random.default_rng(31))
    counts = np.bincount(tau * 12 + y, minlength=sampler.law.size)
    fit = chi_square_test(counts, sampler.law.ravel(), ALPHA)
    print(fit.describe())
    assert not fit.rejected, fit.describe()


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["token", "block"])
def test_output_law_sampler_matches_output_law(method):
    gen = np.random.default_rng(8)
    law = laws.output_law(TableModel(gen, 4, 3), TableModel(gen, 4, 3), 3, method)
    sampler = sampling.OutputLawSampler(law)
    idx = sampler.sample(400_000, np.random.default_rng(9))
    fit = chi_square_test(np.bincount(idx, minlength=len(law)), [law[o] for o in sampler.outcomes], ALPHA)
    print(fit.describe())
    assert not fit.rejected, fit.describe()
    assert sampler.accepted_counts(idx).max() <= 3


def test_zero_probability_cells_are_never_drawn():
    probs = np.array([0.0, 0.5, 0.0, 0.0, 0.5, 0.0])
    draws = sampling.CategoricalSampler(probs).sample_flat(100_000, np.random.default_rng(1))
    assert set(np.unique(draws)) == {1, 4}
    with pytest.raises(ValueError):
        sampling.CategoricalSampler(np.zeros(3))


def test_broken_sampler_is_detected():
    """A sampler whose table is off by one cell (a classic searchsorted slip) fails the fit."""
    target, draft, ids = _request(3)
    law = laws.conditional_law(target, draft, ids, 0.9, "block")
    broken = sampling.CategoricalSampler(np.roll(law.ravel(), 1))
    flat = broken.sample_flat(400_000, np.random.default_rng(2))
    fit = chi_square_test(np.bincount(flat, minlength=law.size), law.ravel(), ALPHA)
    print(fit.describe())
    assert fit.rejected
