"""The pre-merge differential (``python -m harness record`` / ``diff``), on CPU-speed kernels.

Uses the float64 oracle as a kernel (it exposes ``random_draws``: decisions are replayed exactly)
and ``torch_eager`` (its own generator, no ``random_draws``: judged in support), on a tiny profile
so the whole file runs in seconds. Wrappers below change one thing each: a wrong sampled token that
keeps the support (only exact replay can call it wrong), a rounding-level logprob change, a random
stream that breaks the kernel's own ``philox_layout`` claim.
"""

from __future__ import annotations

import dataclasses
import gzip
import json

import numpy as np
import pytest
import torch

from harness.adapters.reference_kernel import ReferenceKernel
from harness.cli import main
from harness.contract import VerifyOutput
from harness.generation.cases import build_batch
from harness.golden.case_set import golden_cases, vocab_ladder
from harness.golden.diff import BOTH_LEGAL, IN_SUPPORT, NEW_WRONG, OLD_WRONG, diff_golden
from harness.golden.file_format import load, record, save
from harness.implementations.torch_eager import TorchEagerKernel
from harness.profiles import PROFILES

TINY = dataclasses.replace(PROFILES["ci"], max_vocab=17, max_reqs=3, max_draft=3, max_logit_elements=1 << 10)
CPU = torch.device("cpu")
REF = "harness.adapters.reference_kernel:kernel"


def _header(kernel, seed=5):
    return {
        "kernel": kernel.name,
        "profile": "tiny",
        "seed": seed,
        "device": "cpu",
        "space": {"methods": sorted(kernel.methods), "dtypes": ["float32", "bfloat16", "float16"]},
    }


def _golden(kernel, seed=5, crafted=False):
    return record(kernel, golden_cases(kernel, TINY, seed, crafted=crafted), CPU, _header(kernel, seed))


def _diff(golden, kernel):
    return diff_golden(golden, kernel, CPU, {})


class WrongBonus(ReferenceKernel):
    """The oracle, but a sampled request that accepts every draft emits the bonus token's neighbour
    (still a token of positive probability: support cannot tell, exact replay can)."""

    name = "wrong-bonus"

    def verify(self, batch):
        out = super().verify(batch)
        ids = out.output_token_ids.clone()
        lengths = batch.draft_lengths()
        for r, n in enumerate(out.num_emitted.tolist()):
            if batch.temperature[r] > 0 and n == lengths[r] + 1 and batch.vocab_size > 1:
                ids[r, n - 1] = (ids[r, n - 1] + 1) % batch.vocab_size
        return VerifyOutput(ids, out.num_emitted, out.logprobs)


class NudgedLogprobs(ReferenceKernel):
    """The oracle with every logprob moved by one float32 ulp: a rounding-level change."""

    name = "nudged-logprobs"

    def verify(self, batch):
        out = super().verify(batch)
        if out.logprobs is None:
            return out
        lp = out.logprobs.clone()
        live = torch.arange(lp.shape[1])[None, :] < out.num_emitted[:, None]
        lp[live] = torch.nextafter(lp[live], torch.full_like(lp[live], -np.inf))
        return VerifyOutput(out.output_token_ids, out.num_emitted, lp)


class ShiftedStream(ReferenceKernel):
    """Claims the Philox layout but reports (and uses) uniforms nudged away from reference.rng's."""

    name = "shifted-stream"
    capabilities = dataclasses.replace(ReferenceKernel.capabilities, philox_layout=True)

    def random_draws(self, batch):
        accept, sample = super().random_draws(batch)
        return accept * 0.5 + 0.25, sample

    def verify(self, batch):
        return ReferenceKernel().verify(batch)


def test_case_set_covers_the_claimed_space_and_is_seeded():
    kernel = ReferenceKernel()
    cases = golden_cases(kernel, TINY, 5, crafted=False)
    assert {c.method for c in cases} == {"token", "block"}
    assert {c.dtype for c in cases} == {"float32", "bfloat16", "float16"}
    assert {c.has_draft_logits for c in cases} == {True, False}
    assert {c.vocab_size for c in cases} == set(vocab_ladder(17)) and 17 in vocab_ladder(17)
    lens = [k for c in cases for k in c.draft_lens]
    assert 0 in lens and TINY.max_draft in lens
    temps = [t for c in cases for t in c.temperatures]
    assert 0.0 in temps and any(t > 0 for t in temps)
    assert {c.max_chunk_bytes for c in cases} >= {None, 1}
    assert {c.want_logprobs for c in cases} == {True, False}
    assert all(c.num_reqs <= TINY.max_reqs for c in cases)
    assert all((sum(c.draft_lens) + c.num_reqs) * c.vocab_size <= TINY.max_logit_elements for c in cases)
    same = golden_cases(kernel, TINY, 5, crafted=False)
    assert [c.to_dict() for c in same] == [c.to_dict() for c in cases]
    other = golden_cases(kernel, TINY, 6, crafted=False)
    assert [c.seeds for c in other] != [c.seeds for c in cases]


def test_file_round_trip_is_exact_and_small(tmp_path):
    golden = _golden(ReferenceKernel(), crafted=True)
    path = tmp_path / "g.json.gz"
    size = save(golden, path)
    assert size == path.stat().st_size < 64 * 1024  # crafted cases are stored by label, not tensors
    loaded = load(path)
    assert [c.input_sha for c in loaded.cases] == [c.input_sha for c in golden.cases]
    for a, b in zip(loaded.cases, golden.cases, strict=True):
        assert torch.equal(a.answer.ids, b.answer.ids) and torch.equal(
            a.answer.num_emitted, b.answer.num_emitted
        )
        assert (a.answer.logprobs is None) == (b.answer.logprobs is None)
        if a.answer.logprobs is not None:
            assert torch.equal(a.answer.logprobs.view(torch.int32), b.answer.logprobs.view(torch.int32))
    assert _diff(loaded, ReferenceKernel()).exit_code == 0


def test_same_kernel_is_identical():
    result = _diff(_golden(ReferenceKernel()), ReferenceKernel())
    assert result.exit_code == 0
    assert all(c.status == "identical" for c in result.cases)


def test_a_wrong_token_inside_the_support_is_new_wrong_by_replay():
    result = _diff(_golden(ReferenceKernel()), WrongBonus())
    assert result.exit_code == 1
    wrong = [r for c in result.cases for r in c.requests if r.verdict == NEW_WRONG]
    assert wrong and all(r.new["basis"] == "replay" for r in wrong)
    assert all(r.old["legal"] for r in wrong)


def test_fail_fast_stops_after_the_first_wrong_case():
    golden = _golden(ReferenceKernel())
    result = diff_golden(golden, WrongBonus(), CPU, {}, fail_fast=True)
    assert result.exit_code == 1
    assert result.of_cases == len(golden.cases) > len(result.cases)
    assert any(r.verdict == NEW_WRONG for r in result.cases[-1].requests)
    assert not any(r.verdict == NEW_WRONG for c in result.cases[:-1] for r in c.requests)


def test_a_fix_is_old_wrong():
    result = _diff(_golden(WrongBonus()), ReferenceKernel())
    counts = result.counts()
    assert result.exit_code == 3
    assert counts[OLD_WRONG] > 0 and counts[NEW_WRONG] == 0


def test_rounding_level_logprob_change_is_both_legal_with_its_margin():
    result = _diff(_golden(ReferenceKernel()), NudgedLogprobs())
    reqs = [r for c in result.cases for r in c.requests]
    assert result.exit_code == 3 and reqs
    assert all(r.verdict == BOTH_LEGAL and r.field.startswith("logprobs") for r in reqs)
    assert all(0 < r.margin < 1e-5 for r in reqs)


def test_a_logprob_off_by_more_than_rounding_is_new_wrong():
    class OffLogprobs(NudgedLogprobs):
        def verify(self, batch):
            out = ReferenceKernel.verify(self, batch)
            if out.logprobs is not None:
                live = torch.arange(out.logprobs.shape[1])[None, :] < out.num_emitted[:, None]
                out.logprobs[live] += 0.01
            return out

    result = _diff(_golden(ReferenceKernel()), OffLogprobs())
    wrong = [r for c in result.cases for r in c.requests if r.verdict == NEW_WRONG]
    assert result.exit_code == 1 and wrong
    assert all(r.new["field"].startswith("logprobs") for r in wrong)
    assert all(r.new["basis"] in ("replay", "greedy") for r in wrong)


def test_other_generator_is_judged_in_support_and_a_broken_one_is_caught():
    golden = _golden(ReferenceKernel())
    eager = _diff(golden, TorchEagerKernel())
    assert eager.exit_code == 3
    assert eager.counts()[IN_SUPPORT] > 0 and eager.counts()[NEW_WRONG] == 0
    from harness.broken.accept_all import kernel as accept_all

    broken = _diff(golden, accept_all)
    assert broken.exit_code == 1
    assert any(
        r.new.get("basis") == "support" for c in broken.cases for r in c.requests if r.verdict == NEW_WRONG
    )


def test_a_broken_philox_claim_is_new_wrong_on_random_draws():
    result = _diff(_golden(ReferenceKernel()), ShiftedStream())
    assert result.exit_code == 1
    assert any(r.field == "random_draws" and r.verdict == NEW_WRONG for c in result.cases for r in c.requests)


def test_changed_inputs_are_not_compared(tmp_path):
    golden = _golden(ReferenceKernel())
    golden.cases[0].case.data_seed += 1  # the generator now builds another batch for this case
    result = _diff(golden, ReferenceKernel())
    assert result.cases[0].status == "inputs changed"
    assert result.exit_code == 2


def test_cli_record_and_diff(tmp_path, capsys):
    out = tmp_path / "ref.json"
    assert (
        main(["record", "--kernel", REF, "--out", str(out), "--profile", "ci", "--quiet", "--no-crafted",
              "--device", "cpu"])
        == 0
    )
    header = json.loads(out.read_text())
    assert header["schema"] == "specfuzz-golden/1" and header["seed"] == 0
    assert {"torch", "numpy"} <= set(header["versions"]) and header["device"] == "cpu"
    assert main(["diff", "--against", str(out), "--kernel", REF, "--quiet", "--device", "cpu"]) == 0
    report = tmp_path / "d.json"
    assert (
        main(
            [
                "diff",
                "--base",
                REF,
                "--kernel",
                "harness.implementations.torch_eager:kernel",
                "--profile",
                "ci",
                "--no-crafted",
                "--device",
                "cpu",
                "--quiet",
                "--json",
                str(report),
            ]
        )
        == 3
    )
    assert json.loads(report.read_text())["counts"]["new wrong"] == 0
    assert main(["diff", "--kernel", REF]) == 2  # neither --against nor --base
    gz = tmp_path / "ref.json.gz"
    assert (
        main(["record", "--kernel", REF, "--out", str(gz), "--profile", "ci", "--quiet", "--no-crafted"]) == 0
    )
    assert json.loads(gzip.decompress(gz.read_bytes()))["cases"] == header["cases"]


@pytest.mark.parametrize("method", ["token", "block"])
def test_support_judgement_rejects_a_zero_probability_token(method):
    from harness.golden.file_format import Answer
    from harness.golden.judge import judge

    kernel = ReferenceKernel()
    case = next(
        c
        for c in golden_cases(kernel, TINY, 5, crafted=False)
        if c.method == method and c.vocab_size > 2 and c.temperatures[0] > 0
    )
    batch = build_batch(dataclasses.replace(case, family="gaussian"), CPU)
    answer = Answer.of(kernel.verify(batch))
    n = int(answer.num_emitted[0])
    assert judge(batch, answer, [0], None)[0].legal
    y = (int(answer.ids[0, n - 1]) + 1) % batch.vocab_size
    batch.target_logits[n - 1, y] = -float("inf")  # request 0's row n - 1 now gives y probability 0
    answer.ids[0, n - 1] = y
    verdict = judge(batch, answer, [0], None)[0]
    assert not verdict.legal and verdict.basis == "support"


def test_mutant_diff_runs_a_child_on_a_mutated_copy(tmp_path):
    """The --mutant pipeline end to end, cheaply: the oracle does not import kernels/, so the diff
    of its own golden file is identical under any mutant of kernels/ (the child still refuses to
    run unless it imported the mutated copy)."""
    from harness.golden.mutant_sweep import MutantDiff, diff_mutant, mutant_table
    from harness.mutation.catalogue import by_name

    path = tmp_path / "ref.json.gz"
    save(_golden(ReferenceKernel()), path)
    row = diff_mutant(by_name(["accept-all"])[0], path, REF, timeout_s=300)
    assert row.exit_code == 0 and row.outcome == "identical", row.detail
    assert row.counts["identical"] == len(load(path).cases)
    assert "accept-all" in mutant_table([row])
    outcomes = {code: MutantDiff("m", code).outcome for code in (0, 1, 2, 3, -11, None)}
    assert outcomes == {
        0: "identical",
        1: "reported",
        2: "error",
        3: "reported",
        -11: "crashed (signal 11)",
        None: "timeout",
    }


def test_shifted_logits_are_an_equivalent_change():
    """Sampled rows shifted by a constant in float32: every change is rounding-level (no new wrong)."""
    from harness.implementations.shifted_logits import ShiftedLogits

    golden = _golden(ReferenceKernel())
    shifted = ShiftedLogits(ReferenceKernel(), shift=0.375)
    case = next(c for c in golden_cases(ReferenceKernel(), TINY, 5, crafted=False) if 0.0 in c.temperatures)
    batch = build_batch(case, CPU)
    moved = shifted.shifted(batch).target_logits != batch.target_logits.float()
    greedy_rows = torch.repeat_interleave(batch.temperature == 0, torch.tensor(batch.draft_lengths()) + 1)
    assert moved[~greedy_rows].any() and not moved[greedy_rows].any()
    result = _diff(golden, shifted)
    assert result.exit_code in (0, 3) and result.counts()[NEW_WRONG] == 0


def test_cases_outside_the_new_kernels_claims_are_not_claimed_not_wrong():
    class TokenOnlyFloat32(ReferenceKernel):
        name = "token-only"
        methods = frozenset({"token"})
        capabilities = dataclasses.replace(ReferenceKernel.capabilities, dtypes=frozenset({torch.float32}))

    golden = _golden(ReferenceKernel())
    result = _diff(golden, TokenOnlyFloat32())
    skipped = [c for c in result.cases if c.status == "not claimed"]
    assert result.exit_code == 0
    outside = [c for c in golden.cases if c.case.method == "block" or c.case.dtype != "float32"]
    assert len(skipped) == len(outside) > 0
