"""harness.implementations.torch_eager: the golden toy example of SPEC.md section 5 (exact laws, tested
with calibrated statistics), contract details, greedy and point-mass identities, invariance of its
randomness under batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.contract import VerifyBatch
from harness.implementations.torch_eager import kernel
from harness.judging import stats

ALPHA = 1e-6  # per statistical assertion in this file; power stated per test


def _toy_batch(method: str, n: int, seed: int) -> VerifyBatch:
    """V = 2, M_b = (1/3, 2/3), M_s = (2/3, 1/3), g = 2, drafts sampled from M_s (SPEC.md 5)."""
    rng = np.random.default_rng(seed)
    drafts = torch.from_numpy(rng.choice(2, size=(n, 2), p=[2 / 3, 1 / 3]).reshape(-1))
    return VerifyBatch(
        target_logits=torch.log(torch.tensor([1 / 3, 2 / 3])).repeat(3 * n, 1),
        draft_logits=torch.log(torch.tensor([2 / 3, 1 / 3])).repeat(2 * n, 1),
        draft_token_ids=drafts,
        cu_num_draft_tokens=torch.arange(0, 2 * n + 1, 2, dtype=torch.int32),
        temperature=torch.ones(n),
        seeds=torch.arange(n, dtype=torch.int64) + seed * n,
        positions=torch.zeros(n, dtype=torch.int64),
        method=method,
    )


@pytest.mark.statistical
@pytest.mark.parametrize("method, law", [("token", [1 / 3, 2 / 9, 4 / 9]), ("block", [1 / 3, 1 / 9, 5 / 9])])
def test_golden_toy_tau_law(method, law):
    # 3 cells; n = 20000 detects TV >= stats.detectable_tv(20000, 3, 1e-6) ~ 0.02 with power 0.999.
    n = 20_000
    out = kernel.verify(_toy_batch(method, n, seed=5))
    counts = torch.bincount(out.num_emitted.long() - 1, minlength=3).numpy()
    fit = stats.goodness_of_fit(counts, law)
    assert not fit.rejects(ALPHA), (counts, law, fit.p_value)
    # ... and the other method's law IS rejected (the test has teeth at this n).
    other = [1 / 3, 1 / 9, 5 / 9] if method == "token" else [1 / 3, 2 / 9, 4 / 9]
    assert stats.goodness_of_fit(counts, other).rejects(ALPHA)


def test_contract_padding_prefix_and_logprobs():
    batch = _toy_batch("token", 64, seed=1)
    batch.want_logprobs = True
    out = kernel.verify(batch)
    assert out.output_token_ids.shape == (64, 3) and out.output_token_ids.dtype == torch.int64
    assert out.num_emitted.dtype == torch.int32
    drafts = batch.draft_token_ids.view(64, 2)
    for r in range(64):
        m = int(out.num_emitted[r])
        assert 1 <= m <= 3
        assert torch.equal(out.output_token_ids[r, : m - 1], drafts[r, : m - 1])
        assert (out.output_token_ids[r, m:] == -1).all() and (out.logprobs[r, m:] == 0).all()
        expected = torch.log(torch.tensor([1 / 3, 2 / 3]))[out.output_token_ids[r, :m]]
        assert torch.allclose(out.logprobs[r, :m], expected, atol=1e-6)


def test_greedy_lowest_index_ties_and_ignores_randomness():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 1.0, 0.0], [0.0, 0.0, 5.0, 5.0]])
    batch = VerifyBatch(
        logits,
        None,
        torch.tensor([1, 1]),
        torch.tensor([0, 2], dtype=torch.int32),
        torch.zeros(1),
        torch.tensor([7]),
        torch.tensor([0]),
        method="block",
    )
    out = kernel.verify(batch)
    # slot 0: argmax (lowest) = 1 == draft, accepted; slot 1: argmax = 0 != 1, emit 0.
    assert out.output_token_ids.tolist() == [[1, 0, -1]] and out.num_emitted.tolist() == [2]


def test_zero_probability_draft_is_never_accepted():
    logits = torch.tensor([[0.0, -torch.inf, 0.0], [0.0, 0.0, 0.0]]).repeat(500, 1)
    batch = VerifyBatch(
        logits,
        None,
        torch.ones(500, dtype=torch.int64),
        torch.arange(501, dtype=torch.int32),
        torch.ones(500),
        torch.arange(500),
        torch.zeros(500, dtype=torch.int64),
    )
    out = kernel.verify(batch)
    assert (out.num_emitted == 1).all() and (out.output_token_ids[:, 0] != 1).all()


def test_randomness_is_per_request_not_per_batch():
    batch = _toy_batch("block", 40, seed=3)
    whole = kernel.verify(batch)
    # Request 7 alone, with its own seed and position, must reproduce its outcome exactly.
    single = VerifyBatch(
        batch.target_logits[21:24],
        batch.draft_logits[14:16],
        batch.draft_token_ids[14:16],
        torch.tensor([0, 2], dtype=torch.int32),
        batch.temperature[7:8],
        batch.seeds[7:8],
        batch.positions[7:8],
        method="block",
    )
    alone = kernel.verify(single)
    assert alone.output_token_ids[0].tolist() == whole.output_token_ids[7].tolist()
