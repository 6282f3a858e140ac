"""``kernels.random_draws`` is bit-equal to ``reference.rng`` and to the eager Philox of the benchmark,
and the uniforms really are what the kernel decides with."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kernels
from bench.torch_eager import uniforms as eager_uniforms
from tests.kernels._batches import make_batch

rng_ref = pytest.importorskip("reference.rng")


@pytest.mark.interpreter
@pytest.mark.parametrize("seed", [3, 4])
def test_random_draws_bit_equal_to_reference(seed):
    batch = make_batch(seed, lengths=[2, 0, 3, 1], vocab=1100)  # V spans two 1024 draw blocks
    batch.seeds[0] = -1  # all-ones key words
    batch.positions[1] = 2**32 - 1  # carry into c2
    accept, sampling = kernels.random_draws(*batch.args())
    cu, seeds, pos = (t.cpu().numpy() for t in (batch.cu_num_draft_tokens, batch.seeds, batch.positions))
    print(f"seed {seed}")
    assert accept.dtype == sampling.dtype == torch.float32
    np.testing.assert_array_equal(accept.cpu().numpy(), rng_ref.accept_uniforms(seeds, pos, cu))
    np.testing.assert_array_equal(sampling.cpu().numpy(), rng_ref.sampling_uniforms(seeds, pos, cu, 1100))
    assert (sampling > 0).all() and (sampling < 1).all()


def test_eager_philox_matches_reference():
    seeds = torch.tensor([0, -1, 2**62 + 12345, -(2**63)])[:, None]
    positions = torch.tensor([0, 2**32 - 1, 2**40 + 7, 123])[:, None]
    vocab = torch.arange(300)[None, :]
    for stream in (0, 1):
        got = eager_uniforms(seeds, positions, stream, vocab).numpy()
        want = rng_ref.random_uniforms(seeds.numpy(), positions.numpy(), stream, vocab.numpy())
        np.testing.assert_array_equal(got, want)


def test_uniform_mapping_edges():
    """The (0, 1) mapping at the extreme words: 0 -> 2^-33, 2^32 - 1 -> largest float32 below 1."""
    bits = np.array([0, 2**32 - 1, 2**31], dtype=np.uint32)
    u = rng_ref.uniform_from_bits(bits)
    assert u[0] == np.float32(2.0**-33) and u[1] == np.nextafter(np.float32(1), np.float32(0))
