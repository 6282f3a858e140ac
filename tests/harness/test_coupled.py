"""Layer 2: coupled exactness passes the reference, catches wrong decisions, and counts ties."""

from __future__ import annotations

import torch

from harness.adapters.reference_kernel import kernel as reference
from harness.contract import VerifyOutput
from harness.generation.cases import build_batch
from harness.judging.decision_compare import compare_decisions, uniform_problems
from harness.judging.oracle import reference_draws, run_reference
from tests.harness import sabotage
from tests.harness.property_helpers import check_case, run_property, simple_case


def test_reference_passes_coupled():
    result = run_property("coupled_exactness", reference)
    assert result.verdict == "pass" and result.cases >= 10, result.failures


def test_not_claimed_without_random_draws():
    result = run_property("coupled_exactness", sabotage.NoDraws())
    assert result.verdict == "not claimed" and "random_draws" in result.note


def test_catches_uniforms_it_does_not_use():
    result = run_property("coupled_exactness", sabotage.HidesItsUniforms())
    assert result.verdict == "fail"
    f = result.failures[0]
    assert f.cls == "coupled_mismatch" and abs(f.evidence["margin"]) > f.evidence["tie_margin"]
    assert f.evidence["kernel_tokens"] != f.evidence["reference_tokens"]


def test_catches_the_wrong_rule_for_block():
    outcome = check_case(
        "coupled_exactness",
        sabotage.TokenRuleForBlock(),
        simple_case(method="block", draft_lens=[4, 4, 3], temperatures=[1.0, 1.0, 1.0], seeds=[1, 2, 3]),
    )
    assert [f.cls for f in outcome.findings] == ["coupled_mismatch"]


def test_catches_zero_uniforms():
    outcome = check_case("coupled_exactness", sabotage.ZeroUniforms(), simple_case())
    assert outcome.findings[0].cls == "bad_uniforms"


def test_uniform_problems_checks_open_interval_and_shapes():
    batch = build_batch(simple_case())
    a, s = (torch.from_numpy(x) for x in reference_draws(batch))
    assert uniform_problems(batch, a, s) == []
    assert uniform_problems(batch, torch.ones_like(a), s)
    assert uniform_problems(batch, a, s[:-1])
    assert uniform_problems(batch, a.double(), s)


def test_disagreement_is_traced_to_one_decision_and_ties_are_excused_only_when_sampled():
    batch = build_batch(simple_case(draft_lens=[2, 2, 2], temperatures=[1.0, 1.0, 1.0]))
    accept, sample = reference_draws(batch)
    ref = run_reference(batch, accept, sample)
    out_ref = VerifyOutput(torch.from_numpy(ref.output_token_ids), torch.from_numpy(ref.num_emitted))
    assert compare_decisions(batch, out_ref, ref, False).disagreements == []
    # A kernel that accepted a different number of drafts for request 0:
    n = ref.num_emitted.copy()
    n[0] = 1 if n[0] > 1 else 2
    ids = ref.output_token_ids.copy()
    ids[0, :] = -1
    ids[0, : n[0]] = batch.draft_token_ids[: n[0] - 1].tolist() + [0]
    found = compare_decisions(
        batch, VerifyOutput(torch.from_numpy(ids), torch.from_numpy(n)), ref, False
    ).disagreements
    assert len(found) == 1 and found[0].kind == "accept" and found[0].request == 0
    assert found[0].margin == ref.accept_margins[0]  # token rule: the slot min(a_kernel, a_oracle)
    d = found[0]
    d.margin = d.tolerance / 2
    assert d.is_tie
    d.kind = "greedy"
    assert not d.is_tie  # greedy decisions are exact: never excused


def test_non_decision_differences_are_never_ties():
    """A wrong accepted prefix or an impossible count is not a float32 near-tie of any decision."""
    batch = build_batch(simple_case(draft_lens=[2, 2, 2], temperatures=[1.0, 1.0, 1.0]))
    accept, sample = reference_draws(batch)
    ref = run_reference(batch, accept, sample)
    ref.sample_margins[:] = 0.0  # every sampling race is an exact tie
    ref.accept_margins[:] = 0.0  # and every acceptance decision too
    n = ref.num_emitted.copy()
    ids = ref.output_token_ids.copy()
    # Request r0 reports a wrong accepted token with the oracle's count; r1 claims k + 2 tokens; r2
    # emits the out-of-range id V (BUGS.md #9).
    r0 = next(r for r in range(batch.num_reqs) if n[r] >= 2)
    r1, r2 = (r0 + 1) % 3, (r0 + 2) % 3
    ids[r0, 0] = (ids[r0, 0] + 1) % batch.vocab_size
    n[r1] = 4
    ids[r2, n[r2] - 1] = batch.vocab_size
    found = compare_decisions(
        batch, VerifyOutput(torch.from_numpy(ids), torch.from_numpy(n)), ref, False
    ).disagreements
    assert {d.request for d in found} == {r0, r1, r2}
    assert not any(d.is_tie for d in found)


class _OffLayout:
    """Claims the documented Philox layout but reports uniforms one float32 ulp below it (as a kernel
    whose uniform mapping drifted would), and decides with exactly those uniforms: decision coupling
    alone cannot see the drift, the layout check must."""

    name, methods = "off-layout", reference.methods

    def __init__(self):
        from dataclasses import replace

        self.capabilities = replace(reference.capabilities, philox_layout=True)

    def random_draws(self, batch):
        a, s = reference.random_draws(batch)
        return torch.nextafter(a, torch.zeros_like(a)), torch.nextafter(s, torch.zeros_like(s))

    def verify(self, batch):
        result = run_reference(batch, *self.random_draws(batch))
        return VerifyOutput(
            output_token_ids=torch.from_numpy(result.output_token_ids),
            num_emitted=torch.from_numpy(result.num_emitted),
        )


def test_layout_claim_is_checked_bit_for_bit():
    from dataclasses import replace

    honest = type("Honest", (), {})()
    honest.name, honest.methods, honest.verify, honest.random_draws = (
        "honest", reference.methods, reference.verify, reference.random_draws)
    honest.capabilities = replace(reference.capabilities, philox_layout=True)
    assert check_case("coupled_exactness", honest, simple_case()).findings == []
    outcome = check_case("coupled_exactness", _OffLayout(), simple_case())
    assert [f.cls for f in outcome.findings] == ["randomness_layout"]
    assert outcome.findings[0].first_field.startswith("random_draws.accept_uniforms")
