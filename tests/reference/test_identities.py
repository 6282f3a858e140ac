"""Every identity of SPEC.md section 5 on random context-dependent model pairs (exact laws, 1e-12)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reference import laws, rng, verify
from reference.probs import softmax_rows
from tests.reference._models import (
    ConstantModel,
    TableModel,
    concat_requests,
    marginal_from_conditional,
    max_abs_difference,
)

TOL = 1e-12
PAIRS = [(seed, v, g) for seed, (v, g) in enumerate([(2, 1), (2, 3), (3, 2), (3, 3), (4, 2), (4, 3)])]


def _pair(seed, vocab, gamma, zero_fraction=0.0):
    gen = np.random.default_rng(500 + seed)
    print(f"pair seed={500 + seed} V={vocab} g={gamma}")
    return TableModel(gen, vocab, gamma, zero_fraction), TableModel(gen, vocab, gamma, zero_fraction)


def extended_to_full_length(law: dict, target_model, gamma: int, vocab: int) -> dict:
    """Extend each output (x^i, y) with target samples to length g+1: the law of the sequence."""
    full: dict = {}
    for (prefix, y), prob in law.items():
        start = prefix + (y,)
        for tail in itertools.product(range(vocab), repeat=gamma + 1 - len(start)):
            seq, p = start, float(prob)
            for x in tail:
                p *= target_model(seq)[x]
                seq = seq + (x,)
            full[seq] = full.get(seq, 0.0) + p
    return full


def target_joint(target_model, gamma: int, vocab: int) -> dict:
    return extended_to_full_length(
        {((), y): target_model(())[y] for y in range(vocab)}, target_model, gamma, vocab
    )


def validity_error(law: dict, target_model, gamma, vocab) -> float:
    return max_abs_difference(
        extended_to_full_length(law, target_model, gamma, vocab), target_joint(target_model, gamma, vocab)
    )


@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("seed,vocab,gamma", PAIRS)
@pytest.mark.parametrize("zero_fraction", [0.0, 0.3])
def test_validity_output_extended_by_target_is_the_target_law(seed, vocab, gamma, method, zero_fraction):
    target, draft = _pair(seed, vocab, gamma, zero_fraction)
    law = laws.output_law(target, draft, gamma, method)
    assert validity_error(law, target, gamma, vocab) < TOL
    first = np.zeros(vocab)
    for (prefix, y), p in law.items():
        first[prefix[0] if prefix else y] += p
    np.testing.assert_allclose(first, target(()), atol=TOL)


def _block_with_token_residual(target_logits, draft_logits, ids, temperature, method):
    """Broken variant (BUGS.md class 7): block's tau law, but the token residual after a rejection."""
    block = laws.conditional_law(target_logits, draft_logits, ids, temperature, "block")
    b = softmax_rows(target_logits, np.full(len(target_logits), temperature))
    q = softmax_rows(draft_logits, np.full(len(draft_logits), temperature))
    out = block.copy()
    for i in range(len(ids)):
        resid = np.maximum(b[i] - q[i], 0.0)
        out[i] = block[i].sum() * (resid / resid.sum() if resid.sum() > 0 else b[i])
    return out


def test_validity_catches_token_residual_after_block_rejection():
    target, draft = _pair(*PAIRS[3])
    good = marginal_from_conditional(target, draft, 3, 3, "block")
    broken = marginal_from_conditional(target, draft, 3, 3, "block", law_fn=_block_with_token_residual)
    assert validity_error(good, target, 3, 3) < TOL
    assert validity_error(broken, target, 3, 3) > 1e-4


@pytest.mark.parametrize("seed", range(6))
def test_gamma_one_block_equals_token(seed):
    gen = np.random.default_rng(seed)
    vocab = int(gen.integers(2, 9))
    target, draft = gen.normal(size=(2, vocab)) * 2, gen.normal(size=(1, vocab)) * 2
    x, temp = [int(gen.integers(vocab))], float(gen.uniform(0.2, 3))
    np.testing.assert_allclose(
        laws.conditional_law(target, draft, x, temp, "token"),
        laws.conditional_law(target, draft, x, temp, "block"),
        atol=TOL,
    )
    t_model, d_model = _pair(seed, 3, 1)
    assert (
        max_abs_difference(
            laws.output_law(t_model, d_model, 1, "token"), laws.output_law(t_model, d_model, 1, "block")
        )
        < TOL
    )


def test_gamma_one_block_equals_token_decision_by_decision():
    gen = np.random.default_rng(77)
    n, vocab = 2000, 7
    batch = dict(
        target_logits=gen.normal(size=(2 * n, vocab)).astype(np.float32),
        draft_logits=gen.normal(size=(n, vocab)).astype(np.float32),
        draft_token_ids=gen.integers(0, vocab, n),
        cu_num_draft_tokens=np.arange(n + 1),
        temperature=gen.uniform(0.3, 2.0, n).astype(np.float32),
    )
    seeds, positions = gen.integers(0, 2**62, n), gen.integers(0, 2**40, n)
    u_a = rng.accept_uniforms(seeds, positions, batch["cu_num_draft_tokens"])
    u_s = rng.sampling_uniforms(seeds, positions, batch["cu_num_draft_tokens"], vocab)
    token = verify.verify_batch(**batch, accept_uniforms=u_a, sampling_uniforms=u_s, method="token")
    block = verify.verify_batch(**batch, accept_uniforms=u_a, sampling_uniforms=u_s, method="block")
    assert np.min(np.abs(token.accept_margins)) > 1e-9  # no exact ties in this sample
    np.testing.assert_array_equal(token.output_token_ids, block.output_token_ids)
    assert 0.1 < (token.num_emitted == 2).mean() < 0.9  # both outcomes occur


@pytest.mark.parametrize("seed", range(5))
def test_point_mass_and_one_hot_targets_make_block_equal_token(seed):
    gen = np.random.default_rng(40 + seed)
    g, vocab = int(gen.integers(1, 5)), int(gen.integers(2, 7))
    target, ids, temp = gen.normal(size=(g + 1, vocab)), gen.integers(0, vocab, g), float(gen.uniform(0.3, 2))
    np.testing.assert_allclose(
        laws.conditional_law(target, None, ids, temp, "token"),
        laws.conditional_law(target, None, ids, temp, "block"),
        atol=TOL,
    )
    draft = gen.normal(size=(g, vocab))
    np.testing.assert_array_equal(  # greedy rows: one-hot targets, the same point mass for both methods
        laws.conditional_law(target, draft, ids, 0.0, "token"),
        laws.conditional_law(target, draft, ids, 0.0, "block"),
    )
    one_hot = TableModel(gen, vocab, 2)
    one_hot.rows = {k: np.eye(vocab)[int(np.argmax(v))] for k, v in one_hot.rows.items()}
    d_model = TableModel(gen, vocab, 2)
    assert (
        max_abs_difference(
            laws.output_law(one_hot, d_model, 2, "token"), laws.output_law(one_hot, d_model, 2, "block")
        )
        < TOL
    )


@pytest.mark.parametrize("method", ["token", "block"])
def test_identical_models_accept_every_draft(method):
    target, _ = _pair(3, 3, 3)
    law = laws.output_law(target, target, 3, method)
    assert all(len(prefix) == 3 for prefix, _ in law)
    gen = np.random.default_rng(5)
    n, vocab, g = 500, 5, 3
    logits = gen.normal(size=(n * (g + 1), vocab)) * 3
    req = np.repeat(np.arange(n), g)
    slot_rows = np.arange(n * g) + req
    seeds, positions = gen.integers(0, 2**62, n), gen.integers(0, 2**40, n)
    cu = np.arange(n + 1) * g
    out = verify.verify_batch(
        logits,
        logits[slot_rows],
        gen.integers(0, vocab, n * g),
        cu,
        np.ones(n),
        rng.accept_uniforms(seeds, positions, cu),
        rng.sampling_uniforms(seeds, positions, cu, vocab),
        method,
    )
    assert np.all(out.num_emitted == g + 1)


@pytest.mark.parametrize("seed", range(8))
def test_block_never_loses_on_average_and_both_respect_the_ceiling(seed):
    target, draft = _pair(seed, 3 if seed % 2 else 4, 3, 0.2 if seed >= 4 else 0.0)
    e_token = laws.expected_accepted(target, draft, 3, "token")
    e_block = laws.expected_accepted(target, draft, 3, "block")
    ceiling = laws.acceptance_ceiling(target, draft, 3)
    print(f"E_token={e_token:.6f} E_block={e_block:.6f} ceiling={ceiling:.6f}")
    assert e_block >= e_token - TOL
    assert e_block <= ceiling + TOL
    # E[tau] = sum_i P(tau >= i), the prefix-mass form, agrees with sum_i i P(tau = i).
    p = laws.tau_distribution(laws.output_law(target, draft, 3, "block"), 3)
    assert abs(sum(p[i:].sum() for i in range(1, 4)) - e_block) < TOL


def test_ceiling_and_dominance_checks_can_fail():
    """Broken variants: accept-everything exceeds the ceiling; a block rule that can only stop at 0 or g
    (h_i := 0 for i < g) loses to token on average."""
    target, draft = _pair(1, 2, 3)
    ceiling = laws.acceptance_ceiling(target, draft, 3)
    assert 3.0 > ceiling + 1e-3  # E[tau] of accept-all
    e_token = laws.expected_accepted(target, draft, 3, "token")
    stop_early = marginal_from_conditional(
        target,
        draft,
        3,
        2,
        "block",
        law_fn=lambda t, d, x, temp, m: _only_full_or_none(laws.conditional_law(t, d, x, temp, m)),
    )
    assert laws.expected_accepted(stop_early) < e_token - 1e-3


def _only_full_or_none(law):
    out = np.zeros_like(law)
    out[-1] = law[-1]
    out[0] = law[0] / max(law[0].sum(), 1e-300) * (1 - law[-1].sum())
    return out


@pytest.mark.parametrize("seed", range(4))
def test_logit_shift_invariance(seed):
    gen = np.random.default_rng(60 + seed)
    g, vocab = 3, 6
    target, draft, ids = (
        gen.normal(size=(g + 1, vocab)),
        gen.normal(size=(g, vocab)),
        gen.integers(0, vocab, g),
    )
    shift_t, shift_d = gen.integers(-50, 50, size=(g + 1, 1)), gen.integers(-50, 50, size=(g, 1))
    for method in ("token", "block"):
        np.testing.assert_allclose(
            laws.conditional_law(target, draft, ids, 0.8, method),
            laws.conditional_law(target + shift_t, draft + shift_d, ids, 0.8, method),
            atol=TOL,
        )
    n = 400
    req = concat_requests([(target, draft, ids)] * n)
    shifted = concat_requests([(target + shift_t, draft + shift_d, ids)] * n)
    seeds, positions = gen.integers(0, 2**62, n), gen.integers(0, 2**40, n)
    cu = req["cu_num_draft_tokens"]
    coins = dict(
        accept_uniforms=rng.accept_uniforms(seeds, positions, cu),
        sampling_uniforms=rng.sampling_uniforms(seeds, positions, cu, vocab),
        temperature=np.full(n, 0.8),
    )
    for method in ("token", "block"):
        a = verify.verify_batch(**req, **coins, method=method)
        b = verify.verify_batch(**shifted, **coins, method=method)
        np.testing.assert_array_equal(a.output_token_ids, b.output_token_ids)


def test_temperature_applies_to_target_and_draft():
    gen = np.random.default_rng(9)
    target, draft, ids = gen.normal(size=(3, 5)), gen.normal(size=(2, 5)), gen.integers(0, 5, 2)
    for method in ("token", "block"):
        scaled = laws.conditional_law(target, draft, ids, 0.4, method)
        np.testing.assert_allclose(
            scaled, laws.conditional_law(target / 0.4, draft / 0.4, ids, 1.0, method), atol=TOL
        )
        target_only = laws.conditional_law(target / 0.4, draft, ids, 1.0, method)  # broken variant
        assert np.abs(scaled - target_only).max() > 1e-3


@pytest.mark.parametrize("gamma", [1, 2, 4])
def test_iid_token_acceptance_formula(gamma):
    gen = np.random.default_rng(gamma)
    p, q = gen.dirichlet(np.ones(4)), gen.dirichlet(np.ones(4))
    alpha = np.minimum(p, q).sum()
    expected = alpha * (1 - alpha**gamma) / (1 - alpha)
    assert abs(laws.expected_accepted(ConstantModel(p), ConstantModel(q), gamma, "token") - expected) < TOL
    assert abs(laws.expected_accepted(ConstantModel(p), ConstantModel(p), gamma, "block") - gamma) < TOL
