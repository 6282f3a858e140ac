"""Pass 1 keeps a near-one-hot block's tail (the sum without its max's 1, in a branch taken when the
block sum is below 2: kernels/row_stats.py): coupled to the oracle on random families and on the
crafted cases whose residual lives on a shared near-one-hot mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.adapters.triton_kernels import kernel
from harness.generation import crafted
from harness.profiles import PROFILES
from harness.properties.base import RunContext
from harness.runner import run_case
from kernels._device import default_device
from tests.kernels import _batches

pytest.importorskip("reference.verify")

CRAFTED = [crafted.shared_mode_case, crafted.ulp_mode_case, crafted.deep_tail_case,
           crafted.near_one_block_case]


@pytest.mark.interpreter
def test_pass1_tails_are_coupled():
    seed = 20261201
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    tally = _batches.Agreement()
    for i, family in enumerate(_batches.FAMILIES):
        method = ("token", "block")[i % 2]
        batch = _batches.make_batch(int(rng.integers(2**32)), num_reqs=3, max_k=3,
                           vocab=int(rng.integers(2, 600)), dtype=(torch.float32, torch.bfloat16)[i % 2],
                           family=family)
        out = _batches.run_kernel(batch, method, want_logprobs=True)
        reference = _batches.reference_result(batch, method, True)
        _batches.compare_to_reference(batch, method, out, reference, tally)
    assert not tally.mismatches, "\n".join(tally.mismatches)
    ctx = RunContext(PROFILES["ci"], default_device(), 0,
                     kernel_spec="harness.adapters.triton_kernels:kernel")
    for make_case in CRAFTED:
        for _, check in run_case(kernel, make_case(), ctx, ["coupled_exactness"]):
            assert not check.skipped and not check.findings, (make_case.__name__, check.findings[:1])

