"""Layer 3: each invariance passes the reference and fails the variant that breaks it."""

from __future__ import annotations

import pytest
import torch

from harness.adapters.reference_kernel import kernel as reference
from harness.generation.batch_edit import (
    exact_shift_grid,
    one_hot_draft_logits,
    quantised,
    select_requests,
    shifted_rows,
)
from harness.generation.cases import build_batch
from tests.harness import sabotage
from tests.harness.property_helpers import check_case, run_property, simple_case

INVARIANCES = (
    "batch_invariance",
    "chunk_invariance",
    "logit_shift",
    "single_draft_block_equals_token",
    "point_mass_identity",
    "greedy_identity",
    "equal_models_accept_all",
)


@pytest.mark.parametrize("name", INVARIANCES)
def test_reference_passes(name):
    result = run_property(name, reference)
    assert result.verdict == "pass", result.failures
    assert result.cases > 0


@pytest.mark.parametrize(
    "name, variant, expected_class",
    [
        ("batch_invariance", sabotage.BatchIndexedSeeds(), ("batch_order", "batch_mates")),
        ("chunk_invariance", sabotage.ChunkKeyedSeeds(), ("chunk_dependence",)),
        ("logit_shift", sabotage.SaturatingExp(), ("shift_dependence",)),
        ("point_mass_identity", sabotage.PointMassAsUniformDraft(), ("point_mass_differs",)),
        ("greedy_identity", sabotage.GreedySampled(), ("greedy_mismatch",)),
    ],
)
def test_invariance_catches(name, variant, expected_class):
    result = run_property(name, variant)
    assert result.verdict == "fail", f"{name} missed {variant.name}"
    assert result.failures[0].cls in expected_class, result.failures[0]


def test_block_equals_token_catches_a_block_only_change():
    case = simple_case(draft_lens=[1, 1, 1], temperatures=[1.0, 1.0, 1.0], seeds=[0, 10, 20])
    assert check_case("single_draft_block_equals_token", reference, case).findings == []
    outcome = check_case("single_draft_block_equals_token", sabotage.BlockSquaresEta(), case)
    assert [f.cls for f in outcome.findings] == ["block_differs_from_token"]


def test_equal_models_catches_temperature_applied_to_one_side():
    case = simple_case(family="equal", draft_lens=[4, 4, 4], temperatures=[0.3, 3.0, 0.5])
    assert check_case("equal_models_accept_all", reference, case).findings == []
    outcome = check_case("equal_models_accept_all", sabotage.TemperatureOnTargetOnly(), case)
    assert [f.cls for f in outcome.findings] == ["rejected_with_equal_models"]


def test_not_claimed_when_capability_missing():
    kernel = sabotage.TokenOnly()
    assert run_property("chunk_invariance", kernel).verdict == "not claimed"
    assert run_property("single_draft_block_equals_token", kernel).verdict == "not claimed"
    assert run_property("point_mass_identity", kernel).verdict == "not claimed"


def test_select_requests_keeps_each_requests_rows():
    batch = build_batch(simple_case())
    sub = select_requests(batch, [2, 0])
    assert sub.draft_lengths() == [2, 3]
    assert torch.equal(sub.target_logits[:3], batch.target_logits[5:8])
    assert torch.equal(sub.draft_token_ids[2:], batch.draft_token_ids[:3])
    assert sub.seeds.tolist() == [13, 11] and sub.positions.tolist() == [100, 5]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_shift_grid_is_exact(dtype):
    batch = build_batch(simple_case(dtype=dtype, family="huge"))
    step, bound, max_shift = exact_shift_grid(batch.target_logits.dtype)
    base = quantised(batch.target_logits, step, bound)
    shifts = torch.full((base.shape[0],), max_shift, dtype=torch.float64)
    back = shifted_rows(shifted_rows(base, shifts), -shifts)
    assert torch.equal(back, base)


def test_one_hot_draft_logits_put_all_mass_on_the_draft():
    batch = build_batch(simple_case(has_draft_logits=False))
    logits = one_hot_draft_logits(batch)
    assert torch.equal(logits.float().softmax(-1).argmax(-1), batch.draft_token_ids)


def test_batch_invariance_skips_single_request_cases():
    outcome = check_case(
        "batch_invariance",
        reference,
        simple_case(draft_lens=[1], temperatures=[1.0], seeds=[1], positions=[0]),
    )
    assert outcome.skipped
