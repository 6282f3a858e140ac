"""layout_reuse: per-layout state must not carry one call's values into the next call of the layout."""

from __future__ import annotations

import numpy as np
import torch

from harness.adapters.reference_kernel import kernel as reference
from harness.contract import BATCH_TENSOR_FIELDS
from harness.generation.cases import build_batch
from harness.properties.layout_reuse import (
    MIN_REQUESTS,
    at_least,
    other_lengths,
    same_layout_sibling,
    with_empty_requests,
)
from tests.harness import sabotage
from tests.harness.property_helpers import check_case, run_property, simple_case


def test_other_lengths_keep_count_and_total_and_move_the_longest():
    for lengths in ([3, 0, 2], [1, 1, 1, 1], [0, 5], [2, 2, 2, 0, 0, 0], [16, 16, 0, 0]):
        new = other_lengths(lengths, 16)
        assert len(new) == len(lengths) and sum(new) == sum(lengths) and min(new) >= 0
        assert max(new) != max(lengths), (lengths, new)
    assert other_lengths([0, 0], 16) == [0, 0] and other_lengths([4], 16) == [4]  # nothing to move


def test_other_lengths_respect_the_declared_longest_draft():
    """Piling every draft onto one request made a 2000-token draft from 246 requests, beyond what the
    kernel declares (found on the H200: our kernels' decide launch compiled for minutes)."""
    lengths = [(7 * i) % 17 for i in range(246)]
    new = other_lengths(lengths, 16)
    assert max(new) <= 16 and sum(new) == sum(lengths) and len(new) == len(lengths)
    assert new != lengths
    assert other_lengths([2, 2, 2], 2) == [2, 2, 2]  # every request at the limit: nothing else fits
    assert other_lengths([2, 1, 2], 2) == [1, 2, 2]  # same longest, another layout


def test_the_sibling_has_the_layout_and_other_values():
    batch = at_least(build_batch(simple_case(), "cpu"), MIN_REQUESTS)
    assert batch.num_reqs >= MIN_REQUESTS
    sibling = same_layout_sibling(batch, np.random.default_rng(0), 16)
    for name in BATCH_TENSOR_FIELDS:
        a, b = getattr(batch, name), getattr(sibling, name)
        if a is None:
            assert b is None
            continue
        assert (a.shape, a.stride(), a.dtype, a.device) == (b.shape, b.stride(), b.dtype, b.device), name
        assert not torch.equal(a, b), f"{name} did not change"
    assert max(sibling.draft_lengths()) != max(batch.draft_lengths())
    wider = with_empty_requests(batch, 2)
    assert wider.num_reqs == batch.num_reqs + 2 and wider.num_draft_total == batch.num_draft_total
    assert wider.target_logits.shape[0] == batch.target_logits.shape[0] + 2
    assert len(set(wider.seeds.tolist())) == len(set(batch.seeds.tolist())) + 2


def test_reference_passes():
    result = run_property("layout_reuse", reference)
    assert result.verdict == "pass", result.failures
    assert result.cases > 0


def test_a_kernel_that_keeps_its_first_lengths_per_layout_fails():
    """A CUDA graph captured with its draft lengths, in miniature (tests/harness/sabotage.py)."""
    result = run_property("layout_reuse", sabotage.StaleLayoutLengths())
    assert result.verdict == "fail"
    first = result.failures[0]
    assert first.cls in ("layout_reuse_stale", "layout_reuse_repeat", "contract_shape"), first
    assert "layout_reuse sequence" in first.message or first.cls.startswith("layout_reuse"), first.message


def test_stale_seeds_are_a_layout_reuse_finding():
    """Seeds kept per layout leave every output well-formed: the witness comparison finds them."""
    case = simple_case(temperatures=[1.0, 0.7, 1.3])
    outcome = check_case("layout_reuse", sabotage.StaleLayoutSeeds(), case)
    assert [f.cls for f in outcome.findings] == ["layout_reuse_stale"], outcome.findings
    assert check_case("layout_reuse", reference, case).findings == []


def test_our_kernels_pass_a_case():
    from harness.adapters.triton_kernels import kernel
    from kernels._device import default_device

    case = simple_case(draft_lens=[3, 0, 2], temperatures=[1.0, 0.0, 0.7], seeds=[11, 12, 13])
    assert check_case("layout_reuse", kernel, case, default_device().type).findings == []
