"""Coupled exactness: with the same randomness, kernel == reference/ decision by decision.

Disagreements are allowed only where the float64 oracle reports a decision margin inside the float32
tie tolerance (tests/kernels/_batches.py); they are counted and printed. Greedy requests get no
tolerance. Runs under the Triton interpreter on CPU (small V, few programs) and compiled on a GPU.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.kernels._batches import (
    FAMILIES,
    Agreement,
    compare_to_reference,
    make_batch,
    reference_result,
    run_kernel,
    stopped_inside,
)

pytest.importorskip("reference.verify")

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _check(batch, method, want_logprobs=True, tally=None):
    tally = tally if tally is not None else Agreement()
    _check_outputs(batch, method, tally, want_logprobs)
    return tally


def _check_outputs(batch, method, tally, want_logprobs=True):
    """Run the kernel, add its agreement with the reference to ``tally``, return its outputs."""
    out = run_kernel(batch, method, want_logprobs=want_logprobs)
    compare_to_reference(batch, method, out, reference_result(batch, method, want_logprobs), tally)
    return out


@pytest.mark.interpreter
def test_coupled_sweep_counts_ties():
    """A fixed sweep over families, dtypes, methods, draft/point-mass; zero mismatches, few ties."""
    master = int(os.environ.get("SPECFUZZ_SEED", "20261129"))
    print(f"master seed {master} (set SPECFUZZ_SEED to change)")
    rng = np.random.default_rng(master)
    tally = Agreement()
    for i in range(16):
        family = FAMILIES[i % len(FAMILIES)]
        batch = make_batch(int(rng.integers(2**32)), num_reqs=3, max_k=4, vocab=int(rng.integers(1, 700)),
                           dtype=DTYPES[i % 3], family=family, with_draft=bool(i % 2))
        _check(batch, ("token", "block")[(i // 2) % 2], tally=tally)
    print(f"requests {tally.requests}, ties {tally.ties}, mismatches {len(tally.mismatches)}")
    assert not tally.mismatches, "\n".join(tally.mismatches)
    assert tally.ties <= 0.05 * tally.requests


@pytest.mark.interpreter
@given(seed=st.integers(0, 2**32 - 1), family=st.sampled_from(FAMILIES),
       method=st.sampled_from(["token", "block"]), with_draft=st.booleans(), dtype=st.sampled_from(DTYPES),
       vocab=st.integers(1, 600))
def test_coupled_hypothesis(seed, family, method, with_draft, dtype, vocab):
    batch = make_batch(seed, num_reqs=2, max_k=3, vocab=vocab, dtype=dtype, family=family,
                       with_draft=with_draft)
    tally = _check(batch, method)
    assert not tally.mismatches, "\n".join(tally.mismatches)


@pytest.mark.interpreter
def test_coupled_block_with_close_drafts():
    """Block verification where its residual masses decide: drafts close to the target ("near").

    With independent target and draft rows ``p_i`` collapses to ~0, so every ``tau`` is 0 or ``g``
    and ``Z_{i+1}`` never matters (a kernel with ``Z = 0`` passed the sweep above). Here some
    requests must stop strictly inside their draft; both launch paths (<= 4 requests: one launch)."""
    master = int(os.environ.get("SPECFUZZ_SEED", "20261202"))
    print(f"master seed {master} (set SPECFUZZ_SEED to change)")
    rng = np.random.default_rng(master)
    tally, inside = Agreement(), dict.fromkeys(DTYPES, 0)
    for i in range(12):
        dtype, num_reqs = DTYPES[i % 3], (3, 6)[(i // 3) % 2]
        # every other vocabulary a power of 2: blocks without a mask
        vocab = int(rng.integers(2, 700)) if i % 2 else 2 ** int(rng.integers(1, 10))
        batch = make_batch(int(rng.integers(2**32)), num_reqs=num_reqs, vocab=vocab,
                           dtype=dtype, family="near", lengths=[int(k) for k in rng.integers(2, 7, num_reqs)],
                           greedy_fraction=0.0)
        out = _check_outputs(batch, "block", tally)
        inside[dtype] += stopped_inside(batch, out)
    print(f"requests {tally.requests}, ties {tally.ties}, stopped inside the draft {inside}")
    assert not tally.mismatches, "\n".join(tally.mismatches)
    assert min(inside.values()) >= 4, "too few requests stop inside their draft: Z is no longer exercised"


@pytest.mark.interpreter
def test_long_drafts_and_empty_drafts():
    """k = 0 beside k = 17 (more than 16 slots, two rows-tiles of the decide kernel)."""
    for method in ("token", "block"):
        batch = make_batch(7 + (method == "block"), lengths=[0, 17, 0, 2], vocab=97, family="shared"
                           if method == "token" else "normal", greedy_fraction=0.0)
        tally = _check(batch, method)
        assert not tally.mismatches, "\n".join(tally.mismatches)


@pytest.mark.interpreter
def test_comparison_catches_wrong_randomness():
    """The comparison can fail: a kernel fed other seeds disagrees with the reference."""
    batch = make_batch(11, num_reqs=4, max_k=4, vocab=200, greedy_fraction=0.0, lengths=[4, 4, 4, 4])
    out = run_kernel(batch, "token")
    shifted = batch.clone()
    shifted.seeds = shifted.seeds ^ 1
    tally = Agreement()
    compare_to_reference(batch, "token", run_kernel(shifted, "token"), reference_result(batch, "token"),
                         tally)
    assert tally.mismatches
    tally = Agreement()
    compare_to_reference(batch, "token", out, reference_result(batch, "token"), tally)
    assert not tally.mismatches
