"""Logprobs of emitted tokens: temperature-scaled target rows (raw log-softmax for greedy), padding 0."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax

from reference import rng, verify

V = 11


def _batch(seed):
    gen = np.random.default_rng(seed)
    lengths = np.array([0, 3, 1, 4, 2, 0, 3])
    cu = np.concatenate([[0], np.cumsum(lengths)])
    n = lengths.size
    batch = dict(
        target_logits=gen.normal(size=(cu[-1] + n, V)).astype(np.float32) * 2,
        draft_logits=gen.normal(size=(cu[-1], V)).astype(np.float32) * 2,
        draft_token_ids=gen.integers(0, V, cu[-1]),
        cu_num_draft_tokens=cu,
        temperature=np.array([0.5, 0.0, 1.0, 2.0, 0.0, 0.7, 1.3], dtype=np.float32),
    )
    seeds, positions = gen.integers(0, 2**62, n), gen.integers(0, 2**40, n)
    batch.update(
        accept_uniforms=rng.accept_uniforms(seeds, positions, cu),
        sampling_uniforms=rng.sampling_uniforms(seeds, positions, cu, V),
    )
    return batch


def expected_logprobs(result, batch, apply_temperature=True):
    cu, temps = batch["cu_num_draft_tokens"], batch["temperature"].astype(np.float64)
    out = np.zeros(result.output_token_ids.shape)
    for r in range(cu.size - 1):
        t = temps[r] if (temps[r] > 0 and apply_temperature) else 1.0
        for j in range(result.num_emitted[r]):
            row = batch["target_logits"][cu[r] + r + j].astype(np.float64)
            out[r, j] = log_softmax(row / t)[result.output_token_ids[r, j]]
    return out


@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_logprobs_are_those_of_the_emitting_rows(method, seed):
    batch = _batch(seed)
    result = verify.verify_batch(**batch, method=method, want_logprobs=True)
    np.testing.assert_allclose(result.logprobs, expected_logprobs(result, batch), atol=1e-12, rtol=1e-12)
    assert verify.verify_batch(**batch, method=method).logprobs is None


def test_logprobs_without_temperature_would_be_caught():
    batch = _batch(1)
    result = verify.verify_batch(**batch, method="token", want_logprobs=True)
    assert np.abs(result.logprobs - expected_logprobs(result, batch, apply_temperature=False)).max() > 1e-3
