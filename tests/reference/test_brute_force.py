"""Brute force for small V and g: the three oracles (verify_batch, conditional_law, output_law) agree.

- Exact: enumerating every draft and weighting its conditional law gives output_law (1e-12).
- Sampled: 2e5 coin vectors (NumPy uniforms) through verify_batch, drafts sampled from the draft model,
  against output_law (marginal) and against conditional_law given each observed draft (chi-square,
  pooled, alpha 1e-6 per assertion; power printed).
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import laws, verify
from tests.reference._models import (
    TableModel,
    drafts_with_probability,
    marginal_from_conditional,
    max_abs_difference,
    request_logits,
)
from tests.reference._stats import chi_square_test

ALPHA = 1e-6  # per assertion; at most 12 assertions here -> family-wise <= 1.2e-5 (Bonferroni)
NUM_SAMPLES = 200_000
CASES = [(seed, vocab, gamma) for seed, (vocab, gamma) in enumerate([(2, 1), (2, 3), (3, 2), (3, 3)])]


def _pair(seed: int, vocab: int, gamma: int, zero_fraction: float = 0.0):
    """A context-dependent pair; ``zero_fraction`` zeroes entries (disjoint supports, b(x) = 0, ...)."""
    gen = np.random.default_rng(1000 + seed)
    print(f"model pair seed={1000 + seed} V={vocab} g={gamma} zeros={zero_fraction}")
    return tuple(TableModel(gen, vocab, gamma, zero_fraction) for _ in range(2))


@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize(
    "seed,vocab,gamma", CASES + [(s, v, g) for s, (v, g) in enumerate([(3, 1), (2, 2), (3, 3)], 10)]
)
@pytest.mark.parametrize("zero_fraction", [0.0, 0.3])
def test_enumerated_conditional_laws_equal_output_law(seed, vocab, gamma, method, zero_fraction):
    target, draft = _pair(seed, vocab, gamma, zero_fraction)
    exact = laws.output_law(target, draft, gamma, method)
    enumerated = marginal_from_conditional(target, draft, gamma, vocab, method)
    assert max_abs_difference(exact, enumerated) < 1e-12
    assert abs(sum(exact.values()) - 1.0) < 1e-12


def sample_through_verify_batch(target, draft, vocab, gamma, method, n, gen):
    """n requests: drafts drawn from ``draft``, coins from ``gen``. Returns (draft index, tau, Y, drafts)."""
    drafts = list(drafts_with_probability(draft, gamma, vocab))
    probs = np.array([p for _, p in drafts])
    which = gen.choice(len(drafts), size=n, p=probs / probs.sum())
    rows = [request_logits(target, draft, d) for d, _ in drafts]
    target_rows = np.stack([t for t, _ in rows])[which].reshape(-1, vocab)
    draft_rows = np.stack([d for _, d in rows])[which].reshape(-1, vocab)
    ids = np.array([d for d, _ in drafts], dtype=np.int64).reshape(len(drafts), gamma)[which].ravel()
    cu = np.arange(n + 1) * gamma
    result = verify.verify_batch(
        target_rows,
        draft_rows,
        ids,
        cu,
        np.ones(n),
        gen.random(n * gamma),
        gen.random((n * (gamma + 1), vocab)),
        method,
    )
    taus = result.num_emitted.astype(np.int64) - 1
    ys = result.output_token_ids[np.arange(n), taus]
    return which, taus, ys, drafts


def fit_exact_laws(target, draft, vocab, gamma, method, gen):
    """One sample of NUM_SAMPLES requests, judged against output_law and against conditional_law."""
    which, taus, ys, drafts = sample_through_verify_batch(
        target, draft, vocab, gamma, method, NUM_SAMPLES, gen
    )
    triples, n_each = np.unique(np.stack([which, taus, ys]), axis=1, return_counts=True)

    exact = laws.output_law(target, draft, gamma, method)
    keys = sorted(exact)
    index = {k: i for i, k in enumerate(keys)}
    counts = np.zeros(len(keys) + 1)  # last cell: any outcome outside the exact support
    for (w, t, y), c in zip(triples.T, n_each, strict=True):
        counts[index.get((drafts[w][0][:t], int(y)), len(keys))] += c
    marginal = chi_square_test(counts, [exact[k] for k in keys] + [0.0], ALPHA)

    observed, expected = [], []
    for w in np.unique(which):
        mask = which == w
        d = drafts[w][0]
        law = laws.conditional_law(*request_logits(target, draft, d), d, 1.0, method)
        cell_counts = np.zeros(law.size)
        np.add.at(cell_counts, taus[mask] * vocab + ys[mask], 1)
        observed.append(cell_counts)
        expected.append(law.ravel() * mask.sum() / NUM_SAMPLES)
    labels = np.concatenate([np.full(o.size, i) for i, o in enumerate(observed)])
    conditional = chi_square_test(np.concatenate(observed), np.concatenate(expected), ALPHA, labels)
    return {"marginal": marginal, "conditional": conditional}


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("seed,vocab,gamma,zero_fraction", [(1, 2, 3, 0.0), (2, 3, 2, 0.0), (5, 3, 3, 0.15)])
def test_verify_batch_matches_exact_laws(seed, vocab, gamma, zero_fraction, method):
    target, draft = _pair(seed, vocab, gamma, zero_fraction)
    gen = np.random.default_rng(7 + seed)
    for name, result in fit_exact_laws(target, draft, vocab, gamma, method, gen).items():
        print(name, method, result.describe())
        assert not result.rejected, result.describe()


MUTANTS = {
    "break_instead_of_scan": ("passes_up_to_last", lambda pass_pad: verify.leading_passes(pass_pad)),
    "token_residual_after_block_rejection": ("residual_scale", lambda method, p: np.ones((p.size, 1))),
    "clip_only_at_end": ("clipped_ratio_step", lambda p, b, q: np.asarray(p) * b / q),
}


@pytest.mark.statistical
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_broken_block_verifiers_are_detected(mutant, monkeypatch):
    name, replacement = MUTANTS[mutant]
    monkeypatch.setattr(verify, name, replacement)
    target, draft = _pair(*CASES[2])
    gen = np.random.default_rng(99)
    results = fit_exact_laws(target, draft, 3, 2, "block", gen)
    for name, r in results.items():
        print(mutant, name, r.describe())
    assert any(r.rejected for r in results.values())
