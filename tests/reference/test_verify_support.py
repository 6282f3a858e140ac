"""Every decision of verify_batch is an outcome its exact conditional law allows (mixed random batches).

With Philox uniforms from reference/rng.py, for every request of a batch mixing greedy and sampled
rows, point-mass and full drafts, ragged lengths and k = 0: ``law[tau, Y] > 0``. Greedy requests must
hit the law's point mass exactly. This is exact (no alpha): a zero-probability outcome is a certain bug.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import laws, rng, verify
from tests.reference._models import log_rows
from tests.reference._structure import check_structure


def _mixed_batch(seed: int, point_mass: bool, n: int = 300, vocab: int = 7):
    gen = np.random.default_rng(seed)
    print(f"batch seed={seed}")
    lengths = gen.integers(0, 5, n)
    cu = np.concatenate([[0], np.cumsum(lengths)])
    target = gen.normal(scale=2.0, size=(cu[-1] + n, vocab))
    target[gen.random(target.shape) < 0.15] = -np.inf
    target[np.all(np.isneginf(target), axis=1), 0] = 0.0
    draft = None if point_mass else gen.normal(scale=2.0, size=(cu[-1], vocab))
    temperature = np.where(gen.random(n) < 0.25, 0.0, gen.uniform(0.05, 3.0, n)).astype(np.float32)
    seeds, positions = gen.integers(-(2**63), 2**63 - 1, n, endpoint=True), gen.integers(0, 2**40, n)
    return dict(
        target_logits=target.astype(np.float32),
        draft_logits=None if draft is None else draft.astype(np.float32),
        draft_token_ids=gen.integers(0, vocab, cu[-1]),
        cu_num_draft_tokens=cu,
        temperature=temperature,
        accept_uniforms=rng.accept_uniforms(seeds, positions, cu),
        sampling_uniforms=rng.sampling_uniforms(seeds, positions, cu, vocab),
    )


def impossible_outcomes(batch: dict, method: str) -> list[int]:
    """Requests whose (tau, Y) has exact probability 0 (greedy: is not the point mass)."""
    result = verify.verify_batch(**batch, method=method)
    check_structure(result, batch)
    cu = batch["cu_num_draft_tokens"]
    bad = []
    for r in range(cu.size - 1):
        k = cu[r + 1] - cu[r]
        rows = slice(cu[r] + r, cu[r + 1] + r + 1)
        draft = None if batch["draft_logits"] is None else batch["draft_logits"][cu[r] : cu[r + 1]]
        law = laws.conditional_law(
            batch["target_logits"][rows],
            draft,
            batch["draft_token_ids"][cu[r] : cu[r + 1]],
            batch["temperature"][r],
            method,
        )
        tau = result.num_emitted[r] - 1
        y = result.output_token_ids[r, tau]
        greedy = batch["temperature"][r] == 0
        if (law[tau, y] != 1.0) if greedy else not (law[tau, y] > 0):
            bad.append(r)
        assert tau <= k
    return bad


@pytest.mark.parametrize("point_mass", [False, True])
@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("seed", [1, 2])
def test_every_outcome_is_allowed_by_the_exact_law(method, point_mass, seed):
    assert impossible_outcomes(_mixed_batch(seed, point_mass), method) == []


def test_support_check_catches_token_residual_after_block_rejection(monkeypatch):
    monkeypatch.setattr(verify, "residual_scale", lambda method, p: np.ones((p.size, 1)))
    assert len(impossible_outcomes(_mixed_batch(1, False, n=4000), "block")) > 0


def test_empty_residual_falls_back_to_the_target_row():
    """q(x) = b(x) = 0 and b == q: rejected for sure, residual empty -> Y ~ b with the same uniforms."""
    target = log_rows([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    draft = log_rows([[0.5, 0.5, 0.0]])
    for method in ("token", "block"):
        law = laws.conditional_law(target, draft, [2], 1.0, method)
        np.testing.assert_allclose(law, [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]])
        for u0 in (0.01, 0.99):
            result = verify.verify_batch(
                target, draft, [2], [0, 1], [1.0], [0.5], np.array([[u0, 1 - u0, 0.5], [0.5] * 3]), method
            )
            assert result.used_fallback[0] and result.num_emitted[0] == 1
            assert result.output_token_ids[0, 0] == (0 if u0 < 0.5 else 1)  # the race on b, same uniforms


@pytest.mark.parametrize("method", ["token", "block"])
def test_empty_and_all_k0_batches(method):
    empty = verify.verify_batch(np.zeros((0, 5)), None, [], [0], [], [], np.zeros((0, 5)), method, True)
    assert empty.output_token_ids.shape == (0, 1) and empty.num_emitted.size == 0
    gen = np.random.default_rng(3)
    target = gen.normal(size=(3, 5))
    no_drafts = verify.verify_batch(
        target, None, [], [0, 0, 0, 0], [1.0, 0.0, 2.0], [], gen.random((3, 5)), method
    )
    assert np.all(no_drafts.num_emitted == 1)
    assert no_drafts.output_token_ids[1, 0] == np.argmax(target[1])


def _single_request(batch: dict, r: int) -> dict:
    cu = batch["cu_num_draft_tokens"]
    rows, slots = slice(cu[r] + r, cu[r + 1] + r + 1), slice(cu[r], cu[r + 1])
    return dict(
        target_logits=batch["target_logits"][rows],
        draft_logits=None if batch["draft_logits"] is None else batch["draft_logits"][slots],
        draft_token_ids=batch["draft_token_ids"][slots],
        cu_num_draft_tokens=np.array([0, cu[r + 1] - cu[r]]),
        temperature=batch["temperature"][r : r + 1],
        accept_uniforms=batch["accept_uniforms"][slots],
        sampling_uniforms=batch["sampling_uniforms"][rows],
    )


def batch_mismatches(batch: dict, method: str, request_of=lambda r: r) -> int:
    """Requests whose batched result differs from verifying ``request_of(r)``'s inputs alone."""
    full = verify.verify_batch(**batch, method=method, want_logprobs=True)
    bad = 0
    for r in range(full.num_emitted.size):
        alone = verify.verify_batch(
            **_single_request(batch, request_of(r)), method=method, want_logprobs=True
        )
        n = full.num_emitted[r]
        same = alone.num_emitted[0] == n and np.array_equal(
            alone.output_token_ids[0, :n], full.output_token_ids[r, :n]
        )
        same = same and np.array_equal(alone.logprobs[0, :n], full.logprobs[r, :n])
        bad += not same
    return bad


@pytest.mark.parametrize("method", ["token", "block"])
def test_batched_oracle_equals_one_request_at_a_time(method):
    """The vectorised ragged layout changes nothing: each request alone gives the same outputs."""
    batch = _mixed_batch(5, False, n=120)
    assert batch_mismatches(batch, method) == 0
    assert batch_mismatches(batch, method, request_of=lambda r: (r + 1) % 120) > 30  # the check can fail
