"""Layer 1: the structural property passes the reference and catches each structural defect."""

from __future__ import annotations

import pytest
import torch

from harness.adapters.reference_kernel import kernel as reference
from harness.execution.guard_bands import guarded_batch
from harness.generation.cases import build_batch
from harness.judging.output_checks import support_violations, value_violations
from harness.properties.structural import modified_inputs
from tests.harness import sabotage
from tests.harness.property_helpers import check_case, run_property, simple_case


def test_reference_passes_structural():
    result = run_property("structural", reference)
    assert result.verdict == "pass", result.failures
    assert result.cases >= 10


@pytest.mark.parametrize(
    "variant, expected_class",
    [
        (sabotage.PaddingZero(), "padding_not_minus_one"),
        (sabotage.WrongWidth(), "contract_shape"),
        (sabotage.ScalesLogitsInPlace(), "input_modified"),
        (sabotage.Nondeterministic(), "nondeterministic"),
        (sabotage.ReadsPastEnd(), "read_outside_inputs"),
        (sabotage.WritesPastEnd(), "write_outside_inputs"),
        (sabotage.LeavesPaddingUnwritten(), "unwritten_output"),
        (sabotage.RaisesOnLargeVocab(), "kernel_raised"),
    ],
)
def test_structural_catches(variant, expected_class):
    case = simple_case(vocab_size=64, seeds=[1, 2, 3], draft_lens=[3, 2, 0])
    outcome = check_case("structural", variant, case)
    assert [f.cls for f in outcome.findings][:1] == [expected_class], outcome.findings
    assert outcome.findings[0].case["vocab_size"] == 64 and "--only structural" in outcome.findings[0].repro


def test_structural_run_shrinks_a_failure_to_a_small_case():
    result = run_property("structural", sabotage.PaddingZero())
    assert result.verdict == "fail"
    case = result.failures[0].case
    assert len(case["draft_lens"]) <= 2 and sum(case["draft_lens"]) <= 2, case


def test_emitted_id_out_of_range_and_zero_probability_are_caught():
    case = simple_case(family="masked", seeds=[3, 4, 5])
    batch = build_batch(case)
    out = sabotage.EmitsVocabSize().verify(batch)
    assert any(v.cls == "id_out_of_range" for v in value_violations(batch, out, True))
    out = sabotage.EmitsZeroProbability().verify(batch)
    assert any(v.cls == "zero_probability_token" for v in support_violations(batch, out))
    assert not support_violations(batch, reference.verify(batch))


def test_modified_inputs_sees_nan_as_equal_and_any_bit_change():
    batch = build_batch(simple_case(family="masked"))
    batch.target_logits[0, 0] = float("nan")
    copy = batch.clone()
    assert modified_inputs(copy, batch) == []
    batch.seeds[0] += 1
    assert modified_inputs(copy, batch) == ["seeds"]


def test_guard_bands_detect_writes_and_keep_values():
    batch = build_batch(simple_case())
    guarded, guards = guarded_batch(batch)
    assert torch.equal(guarded.target_logits, batch.target_logits)
    assert all(g.intact() for g in guards.values())
    guards["seeds"].buffer[-1] = 0
    assert not guards["seeds"].intact()
