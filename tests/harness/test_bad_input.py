"""Layer 5: malformed batches are refused clearly; degenerate rows get the documented outcome."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from harness.adapters.reference_kernel import kernel as reference
from harness.generation.cases import Case, build_batch
from harness.generation.malformations import DEGENERATIONS, MALFORMATIONS, as_case
from harness.wellformed import degenerate_rows, malformations
from tests.harness import sabotage
from tests.harness.property_helpers import check_case, run_property, simple_case


@pytest.mark.parametrize("name", sorted(MALFORMATIONS))
def test_every_malformation_is_detected_by_wellformed_and_refused_by_reference(name):
    case = as_case(simple_case(), name, MALFORMATIONS[name])
    batch = build_batch(case)
    assert malformations(batch), name
    assert check_case("bad_input_errors", reference, case).findings == []


@pytest.mark.parametrize("name", sorted(DEGENERATIONS))
def test_degenerations_are_legal_but_degenerate(name):
    batch = build_batch(as_case(simple_case(), name, DEGENERATIONS[name]))
    assert malformations(batch) == []
    assert degenerate_rows(batch) or name == "target_row_pos_inf"
    assert (
        check_case(
            "degenerate_rows_outcome", reference, as_case(simple_case(), name, DEGENERATIONS[name])
        ).findings
        == []
    )


def test_malformed_case_round_trips_through_json():
    case = as_case(simple_case(), "cu_decreasing", MALFORMATIONS["cu_decreasing"])
    again = Case.from_dict(case.to_dict())
    assert again.label == "cu_decreasing"
    assert build_batch(again).cu_num_draft_tokens.tolist() == build_batch(case).cu_num_draft_tokens.tolist()


def test_reference_passes_both_properties():
    assert run_property("bad_input_errors", reference).verdict == "pass"
    assert run_property("degenerate_rows_outcome", reference).verdict == "pass"


def test_accepting_out_of_range_drafts_is_caught():
    case = as_case(simple_case(), "draft_id_equals_vocab", MALFORMATIONS["draft_id_equals_vocab"])
    outcome = check_case("bad_input_errors", sabotage.Lenient(), case)
    assert [f.cls for f in outcome.findings] == ["accepted_malformed_input"]


def test_a_kernel_that_checks_once_per_layout_is_caught_after_a_good_call():
    """bad_input_after_good_call verifies the well-formed batch first, then every malformation of it.
    A kernel that trusts layouts it has seen passes bad_input_errors (each malformed batch arrives
    cold) and fails here on every malformation that keeps the layout (the values ones)."""
    kernel = sabotage.ChecksOncePerLayout()
    for name in ("draft_id_equals_vocab", "cu_decreasing", "temperature_nan"):
        cold = sabotage.ChecksOncePerLayout()
        malformed = as_case(simple_case(), name, MALFORMATIONS[name])
        assert check_case("bad_input_errors", cold, malformed).findings == []
    outcome = check_case("bad_input_after_good_call", kernel, simple_case())
    accepted = {f.first_field for f in outcome.findings if f.cls == "accepted_malformed_input"}
    assert {"draft_id_equals_vocab", "cu_decreasing", "temperature_nan", "temperature_negative"} <= accepted
    assert all("malformed_case" in f.evidence for f in outcome.findings)
    assert check_case("bad_input_after_good_call", reference, simple_case()).findings == []


def test_a_refused_well_formed_batch_is_a_finding():
    refusing = sabotage.Variant()
    refusing.verify = lambda batch: (_ for _ in ()).throw(ValueError("refuses everything"))
    outcome = check_case("bad_input_after_good_call", refusing, simple_case())
    assert [f.cls for f in outcome.findings] == ["refused_wellformed_batch"]


def test_unclear_error_is_caught():
    case = as_case(simple_case(), "method_unknown", MALFORMATIONS["method_unknown"])
    outcome = check_case("bad_input_errors", sabotage.IndexErrorOnBadInput(), case)
    assert [f.cls for f in outcome.findings] == ["unclear_error"]


def test_nan_row_turned_into_vocab_size_is_caught():
    kernel = sabotage.NanRowEmitsVocabSize()
    assert run_property("bad_input_errors", kernel).verdict == "not claimed"
    case = as_case(simple_case(), "target_row_all_nan", DEGENERATIONS["target_row_all_nan"])
    outcome = check_case("degenerate_rows_outcome", kernel, case)
    assert {f.cls for f in outcome.findings} == {"id_out_of_range"}


class PaddingKernel(sabotage.Variant):
    """Documents -1 drafts as padding: never accepted (replaced by a token it then rejects)."""

    name = "minus-one-padding"
    capabilities = replace(sabotage.Variant.capabilities, draft_padding_minus_one=True)

    def see(self, batch):
        ids = batch.draft_token_ids
        if ids.dim() == 1 and ids.numel() and bool((ids == -1).any()):
            target = batch.target_logits.clone()
            rows = torch.tensor([r + i for r, n in enumerate(batch.draft_lengths()) for i in range(n)])
            rows = rows[(ids == -1).cpu()]
            target[rows, 0] = float("-inf")  # the padding token has target probability 0
            batch = replace(batch, draft_token_ids=torch.where(ids == -1, 0, ids), target_logits=target)
        return batch


class PaddingAccepted(PaddingKernel):
    name = "minus-one-accepted"

    def emit(self, batch, out):
        ids = out.output_token_ids.clone()
        pad = (batch.draft_token_ids == -1).nonzero().flatten().tolist()
        cu = batch.cu_num_draft_tokens.tolist()
        for slot in pad:
            r = max(i for i in range(batch.num_reqs) if cu[i] <= slot)
            ids[r, slot - cu[r]] = -1  # "accepted" the padding
            out.num_emitted[r] = max(int(out.num_emitted[r]), slot - cu[r] + 2)
            ids[r, slot - cu[r] + 1] = 0
        return replace(out, output_token_ids=ids)


def test_minus_one_padding_when_documented_is_judged_by_outcome_not_refusal():
    case = as_case(simple_case(), "draft_id_minus_one", MALFORMATIONS["draft_id_minus_one"])
    assert check_case("bad_input_errors", PaddingKernel(), case).skipped
    assert check_case("degenerate_rows_outcome", PaddingKernel(), case).findings == []
    outcome = check_case("degenerate_rows_outcome", PaddingAccepted(), case)
    assert "id_out_of_range" in {f.cls for f in outcome.findings}
