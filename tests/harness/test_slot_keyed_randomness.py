"""``Capabilities.randomness_per_request=False`` (FlashInfer keys its generator by the batch slot):
``batch_invariance`` judges greedy requests only, so the slot-dependence the kernel documents is no
false alarm, while a greedy request that changes with its slot still fails."""

from __future__ import annotations

import dataclasses

import torch

from harness.adapters.reference_kernel import ReferenceKernel
from harness.contract import VerifyBatch
from harness.profiles import PROFILES
from harness.properties import REGISTRY
from harness.properties.base import FAIL, PASS, RunContext


class SlotKeyed(ReferenceKernel):
    """The oracle, with each request's seed mixed with its batch slot (as FlashInfer's subsequence)."""

    name = "reference-slot-keyed"
    capabilities = dataclasses.replace(ReferenceKernel.capabilities, randomness_per_request=False)

    def verify(self, batch: VerifyBatch):
        slots = torch.arange(batch.num_reqs, dtype=batch.seeds.dtype, device=batch.seeds.device)
        return super().verify(dataclasses.replace(batch, seeds=batch.seeds * 7919 + slots))


class ClaimsPerRequest(SlotKeyed):
    capabilities = ReferenceKernel.capabilities


class GreedyFollowsSlot(SlotKeyed):
    """Also wrong where it must not be: a greedy request in slot 0 emits token 0."""

    def verify(self, batch: VerifyBatch):
        out = super().verify(batch)
        if batch.num_reqs and float(batch.temperature[0]) == 0.0 and batch.vocab_size > 1:
            out.output_token_ids[0, 0] = (out.output_token_ids[0, 0] + 1) % batch.vocab_size
            out.num_emitted[0] = 1
            out.output_token_ids[0, 1:] = -1
        return out


def _run(kernel, seed: int = 3):
    profile = dataclasses.replace(PROFILES["ci"], max_examples=12)
    ctx = RunContext(profile=profile, device=torch.device("cpu"), seed=seed, kernel_spec="slot-keyed")
    return REGISTRY["batch_invariance"].run(kernel, ctx)


def test_a_slot_keyed_kernel_that_claims_per_request_randomness_fails():
    assert _run(ClaimsPerRequest()).verdict == FAIL


def test_slot_keyed_randomness_is_judged_on_greedy_requests_only():
    result = _run(SlotKeyed())
    assert result.verdict == PASS and result.cases > 0, result.note


def test_a_greedy_request_that_follows_its_slot_still_fails():
    assert _run(GreedyFollowsSlot()).verdict == FAIL
