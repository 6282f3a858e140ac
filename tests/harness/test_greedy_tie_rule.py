"""``Capabilities.greedy_ties="any"`` (SGLang: a greedy row beside a sampled request is a top-1
renormalised row sampled with a coin): a tie between maximal logits may go to any maximum, so the
greedy properties accept any maximum there, while a token that is no maximum still fails, and a
kernel that claims the lowest-index rule is still held to it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from harness.broken.greedy_last_index_tie import GreedyLastIndexTie
from harness.contract import Capabilities
from harness.judging.consequences import greedy_output_ok
from harness.profiles import PROFILES
from harness.properties import REGISTRY
from harness.properties.base import FAIL, PASS, RunContext


class LastMaximumAnyRule(GreedyLastIndexTie):
    """Ties to the last maximum, and says that its rule is "any maximum"."""

    name = "last-maximum-any-rule"

    def __init__(self):
        super().__init__()
        self.capabilities = dataclasses.replace(self.capabilities, greedy_ties="any")


class NotAMaximum(LastMaximumAnyRule):
    """Claims "any maximum", but a greedy row whose maximum ties emits the token after the last one."""

    name = "not-a-maximum-any-rule"

    def greedy_ids(self, logits):
        last = super().greedy_ids(logits)
        z = torch.nan_to_num(logits, nan=-torch.inf)
        tied = (z == z.max(dim=-1, keepdim=True).values).sum(-1) > 1
        return torch.where(tied, (last + 1) % logits.shape[-1], last)


def _run(name: str, kernel, seed: int = 5):
    profile = dataclasses.replace(PROFILES["ci"], max_examples=12)
    ctx = RunContext(profile=profile, device=torch.device("cpu"), seed=seed, kernel_spec="tie-rule")
    return REGISTRY[name].run(kernel, ctx)


@pytest.mark.parametrize("prop", ["law_consequences", "greedy_identity"])
def test_any_maximum_passes_under_the_any_rule_and_fails_under_the_lowest(prop):
    lowest = _run(prop, GreedyLastIndexTie())
    assert lowest.verdict == FAIL, lowest.note
    anyrule = _run(prop, LastMaximumAnyRule())
    assert anyrule.verdict == PASS and anyrule.cases > 0, (anyrule.note, anyrule.failures[:1])


@pytest.mark.parametrize("prop", ["law_consequences", "greedy_identity"])
def test_a_token_that_is_no_maximum_fails_under_the_any_rule(prop):
    result = _run(prop, NotAMaximum())
    assert result.verdict == FAIL, result.note


def test_greedy_output_ok():
    rows = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 1.0, 0.0], [0.0, 0.0, 0.0, 5.0]])
    for ties, cases in {
        "lowest": {((1, 0), (1, 0, 3)): True, ((2, 0), (1,)): True, ((2, 0), (2,)): False},
        "any": {((2, 1), (2, 1, 3)): True, ((2, 1), (1,)): True,
                ((2, 1), (2, 0)): True,  # a tied maximum rejected for another
                ((2, 1), (2,)): False,  # a maximum rejected for itself
                ((2, 1), (3,)): False,  # no maximum
                ((0, 1), (0, 1, 3)): False,  # accepted a draft that is no maximum
                ((2, 1), (2, 1, 3, 3)): False},  # longer than the drafts allow
    }.items():
        for (drafts, emitted), ok in cases.items():
            assert greedy_output_ok(rows, list(drafts), list(emitted), ties) is ok, (ties, drafts, emitted)


def test_an_unknown_tie_rule_is_refused():
    with pytest.raises(ValueError, match="greedy_ties"):
        Capabilities(greedy_ties="highest")
