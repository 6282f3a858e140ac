"""The contract dataclasses, well-formedness, and the JSON case round trip."""

from __future__ import annotations

import json

import pytest
import torch

from harness.contract import Capabilities, capabilities_of, has_random_draws
from harness.generation.cases import Case, build_batch, case_from_batch, decode_tensor, encode_tensor
from harness.wellformed import check_well_formed, malformations
from tests.harness.property_helpers import simple_case


def test_batch_geometry():
    batch = build_batch(simple_case())
    assert batch.num_reqs == 3 and batch.vocab_size == 17
    assert batch.draft_lengths() == [3, 0, 2] and batch.max_draft_len == 3
    assert batch.num_logits == 8 and batch.num_draft_total == 5
    assert batch.cu_num_draft_tokens.dtype == torch.int32 and batch.seeds.dtype == torch.int64
    assert malformations(batch) == []


def test_clone_is_deep_and_to_moves():
    batch = build_batch(simple_case())
    copy = batch.clone()
    copy.target_logits[0, 0] += 1
    assert not torch.equal(copy.target_logits, batch.target_logits)
    assert batch.to("cpu").target_logits.device.type == "cpu"


def test_capabilities_default_is_conservative():
    caps = capabilities_of(object())
    assert caps == Capabilities() and not caps.logprobs and not caps.chunking
    assert not has_random_draws(object())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_case_round_trip_is_exact(dtype):
    case = simple_case(dtype=dtype, family="masked", max_chunk_bytes=123, want_logprobs=True)
    again = Case.from_dict(json.loads(json.dumps(case.to_dict())))
    a, b = build_batch(case), build_batch(again)
    assert torch.equal(a.target_logits.float().nan_to_num(), b.target_logits.float().nan_to_num())
    assert a.target_logits.dtype == getattr(torch, dtype)
    assert b.max_chunk_bytes == 123 and b.want_logprobs


def test_explicit_tensors_rebuild_a_batch_bit_for_bit():
    batch = build_batch(simple_case(dtype="bfloat16", positions=[0, 2**40, 7]))
    case = Case.from_dict(json.loads(json.dumps(case_from_batch(batch).to_dict())))
    again = build_batch(case)
    for name in (
        "target_logits",
        "draft_logits",
        "draft_token_ids",
        "cu_num_draft_tokens",
        "seeds",
        "positions",
    ):
        x, y = getattr(batch, name), getattr(again, name)
        assert x.dtype == y.dtype and torch.equal(x, y), name
    t = torch.tensor([float("-inf"), 1.5, float("nan")], dtype=torch.float16)
    assert torch.equal(decode_tensor(encode_tensor(t)).isnan(), t.isnan())


def test_unknown_case_fields_are_refused():
    with pytest.raises(ValueError, match="unknown case fields"):
        Case.from_dict({**simple_case().to_dict(), "colour": "red"})


def test_check_well_formed_names_the_problem():
    batch = build_batch(simple_case())
    batch.temperature[1] = -1.0
    with pytest.raises(ValueError, match="temperature must be finite and >= 0"):
        check_well_formed(batch)


def test_property_result_round_trips_through_report_json():
    from harness.properties.base import Finding, PropertyResult, StatRecord

    result = PropertyResult(
        "p",
        4,
        "fail",
        cases=3,
        statistics=[StatRecord("s", 10, 4, 1.5, 0.2, 1e-6, 0.999, 0.05)],
        failures=[Finding("coupled_mismatch", "num_emitted[0]", "m", case={"vocab_size": 2})],
    )
    as_json = json.loads(json.dumps(result.to_json()))
    assert as_json["failures"][0]["class"] == "coupled_mismatch"
    as_json["statistics"][0]["shard"] = "1/2"  # keys added by merge are ignored
    assert PropertyResult.from_json(as_json) == result
