"""verify_batch driven by reference/rng.py's Philox uniforms reproduces the exact conditional laws.

One fixed request (ragged batch-mates included) is replicated with distinct seeds and positions; the
empirical law of (tau, Y) is compared with conditional_law by a pooled chi-square (alpha 1e-6, power
printed) and E[tau] by a z-test with the exact variance (alpha 1e-6). 4 methods x 2 draft kinds x 2
assertions = 16 assertions here: family-wise false alarm <= 1.6e-5 (Bonferroni).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from reference import laws, rng, verify
from tests.reference._stats import chi_square_test

ALPHA = 1e-6
NUM_REQUESTS = 200_000
VOCAB, GAMMA, TEMPERATURE = 6, 3, 0.7


def _request(seed: int):
    gen = np.random.default_rng(seed)
    print(f"request seed={seed}")
    target = gen.normal(scale=1.5, size=(GAMMA + 1, VOCAB)).astype(np.float32)
    draft = gen.normal(scale=1.5, size=(GAMMA, VOCAB)).astype(np.float32)
    ids = gen.integers(0, VOCAB, size=GAMMA)
    return target, draft, ids


def _replicated_batch(target, draft, ids, n, gen):
    """n copies with fresh (seed, position); every 4th request is a k=0 request riding along."""
    seeds = gen.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64, endpoint=True)
    positions = gen.integers(0, 2**40, size=n, dtype=np.int64)
    has_draft = np.arange(n) % 4 != 3
    lengths = np.where(has_draft, GAMMA, 0)
    cu = np.concatenate([[0], np.cumsum(lengths)])
    row_src = np.concatenate([np.arange(k + 1) for k in lengths])
    slot_src = np.concatenate([np.arange(k) for k in lengths])
    batch = dict(
        target_logits=target[row_src],
        draft_logits=None if draft is None else draft[slot_src],
        draft_token_ids=ids[slot_src],
        cu_num_draft_tokens=cu,
        temperature=np.full(n, TEMPERATURE, dtype=np.float32),
        accept_uniforms=rng.accept_uniforms(seeds, positions, cu),
        sampling_uniforms=rng.sampling_uniforms(seeds, positions, cu, VOCAB),
    )
    return batch, has_draft


def empirical_fit(method: str, point_mass: bool, seed: int = 4242, sampling_mutator=None):
    target, draft, ids = _request(seed)
    if point_mass:
        draft = None
    gen = np.random.default_rng(seed + 1)
    batch, has_draft = _replicated_batch(target, draft, ids, NUM_REQUESTS, gen)
    if sampling_mutator is not None:
        batch = sampling_mutator(batch)
    result = verify.verify_batch(**batch, method=method)
    tau = result.num_emitted.astype(np.int64) - 1
    y = result.output_token_ids[np.arange(tau.size), tau]
    tau, y = tau[has_draft], y[has_draft]
    law = laws.conditional_law(target, draft, ids, np.float32(TEMPERATURE), method)
    counts = np.bincount(tau * VOCAB + y, minlength=law.size)
    fit = chi_square_test(counts, law.ravel(), ALPHA)
    mean, var = laws.expected_accepted(law), laws.accepted_variance(law)
    z = (tau.mean() - mean) / np.sqrt(var / tau.size)
    z_critical = stats.norm.isf(ALPHA / 2)
    print(
        f"{method} point_mass={point_mass}: {fit.describe()}; E[tau]={mean:.5f} observed={tau.mean():.5f} "
        f"z={z:.2f} (|z| < {z_critical:.2f})"
    )
    return fit, abs(z) < z_critical


@pytest.mark.statistical
@pytest.mark.parametrize("point_mass", [False, True])
@pytest.mark.parametrize("method", ["token", "block"])
def test_philox_driven_verifier_matches_conditional_law(method, point_mass):
    fit, mean_ok = empirical_fit(method, point_mass)
    assert not fit.rejected, fit.describe()
    assert mean_ok


def _reuse_accept_uniform_for_sampling(batch):
    """Broken randomness (BUGS.md class 1): each row's sampling uniforms are its accept uniform."""
    batch = dict(batch)
    cu = batch["cu_num_draft_tokens"]
    req = np.repeat(np.arange(cu.size - 1), np.diff(cu))
    rows = np.arange(cu[-1]) + req
    sampling = batch["sampling_uniforms"].copy()
    sampling[rows] = batch["accept_uniforms"][:, None]
    batch["sampling_uniforms"] = sampling
    return batch


def _uniforms_on_half_interval(batch):
    batch = dict(batch)
    batch["accept_uniforms"] = batch["accept_uniforms"] * np.float32(0.5)
    return batch


@pytest.mark.statistical
@pytest.mark.parametrize("mutator", [_reuse_accept_uniform_for_sampling, _uniforms_on_half_interval])
def test_broken_randomness_is_detected(mutator):
    fit, mean_ok = empirical_fit("block", False, sampling_mutator=mutator)
    assert fit.rejected or not mean_ok
