"""``Capabilities.draft_logits=False`` (a target-only verifier such as SGLang's): no property sends such a
kernel draft logits, and the properties that need a draft distribution are ``not claimed``.

The kernel under test is the oracle with a guard: it fails (an AssertionError, which the harness turns
into a finding) the moment a batch with draft logits for real drafts reaches it.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.adapters.reference_kernel import ReferenceKernel
from harness.contract import Capabilities, VerifyBatch, domain_of
from harness.generation.strategies import draft_kinds
from harness.profiles import PROFILES
from harness.properties import REGISTRY
from harness.properties.base import FAIL, NOT_CLAIMED, PASS, SKIPPED, RunContext, unclaimed_result


class TargetOnlyOracle(ReferenceKernel):
    name = "reference-target-only"
    methods = frozenset({"token"})
    capabilities = dataclasses.replace(
        ReferenceKernel.capabilities, draft_logits=False, raises_on_bad_input=False, chunking=False
    )
    seen_draft_logits = 0

    def random_draws(self, batch):
        return self._guard(batch) or super().random_draws(batch)

    def verify(self, batch: VerifyBatch):
        return self._guard(batch) or super().verify(batch)

    def _guard(self, batch: VerifyBatch):
        if batch.draft_logits is not None and batch.num_draft_total > 0:
            type(self).seen_draft_logits += 1
            raise AssertionError("draft logits reached a target-only kernel")
        return None


def _context(seed: int = 5) -> RunContext:
    profile = dataclasses.replace(PROFILES["ci"], max_examples=4)
    return RunContext(profile=profile, device=torch.device("cpu"), seed=seed, kernel_spec="target-only")


def test_draft_kinds_and_domain():
    assert draft_kinds(Capabilities()) == (True, False)
    assert draft_kinds(Capabilities(draft_logits=False)) == (False,)
    assert draft_kinds(Capabilities(point_mass_drafts=False)) == (True,)
    assert domain_of(TargetOnlyOracle())["draft_logits"] is False


@pytest.mark.parametrize(
    "name", ["equal_models_accept_all", "point_mass_identity", "marginal_law", "expected_accepted"]
)
def test_properties_needing_a_draft_distribution_are_not_claimed(name):
    result = unclaimed_result(REGISTRY[name], TargetOnlyOracle())  # what the runner asks first
    assert result is not None and result.verdict == NOT_CLAIMED and "draft logits" in result.note


@pytest.mark.parametrize(
    "name", ["structural", "greedy_identity", "logit_shift", "law_consequences", "coupled_exactness",
             "conditional_law", "first_token_law"]  # the statistical ones: their kernel-cost pilot too
)
def test_no_draft_logits_reach_a_target_only_kernel(name):
    TargetOnlyOracle.seen_draft_logits = 0
    kernel = TargetOnlyOracle()
    ctx = _context()
    ctx.extra["stat_seconds_per_property"] = float("inf")  # verdicts, not speed
    result = unclaimed_result(REGISTRY[name], kernel) or REGISTRY[name].run(kernel, ctx)
    assert TargetOnlyOracle.seen_draft_logits == 0
    assert result.verdict in (PASS, SKIPPED), [f.message for f in result.failures]


def test_the_guard_can_fail():
    """The same guard on a kernel that claims draft logits: the harness reports the failure."""

    class Claims(TargetOnlyOracle):
        capabilities = dataclasses.replace(TargetOnlyOracle.capabilities, draft_logits=True)

    result = REGISTRY["equal_models_accept_all"].run(Claims(), _context())
    assert result.verdict == FAIL
