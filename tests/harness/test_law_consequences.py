"""``law_consequences`` (harness/judging/consequences.py): every relation fails on an output that breaks it,
holds on correct kernels, and stays silent where float32 cannot decide (ties, underflow, residuals
below the mass floor). Outputs are written by hand on small batches, so each check is shown to be
able to fail; the broken kernels of ``harness.broken`` are judged in test_broken.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.adapters.reference_kernel import kernel as reference_kernel
from harness.contract import VerifyBatch, VerifyOutput
from harness.generation.cases import build_batch
from harness.implementations.torch_eager import kernel as eager_kernel
from harness.judging.consequences import MASS_FLOOR, Tally, consequence_violations
from harness.judging.tolerances import LOGPROB_TOLERANCE, exponent_scale_of_rows, logprob_tolerance
from harness.properties import REGISTRY
from reference.probs import log_softmax_rows
from tests.harness.property_helpers import cpu_context, simple_case

PROP = REGISTRY["law_consequences"]


def _batch(target, draft, ids, method="token", temperature=1.0, logprobs=False) -> VerifyBatch:
    """One request from probability (or log) rows; ``draft`` None: point masses."""
    k = len(ids)
    return VerifyBatch(
        target_logits=torch.tensor(np.log(np.asarray(target, dtype=np.float64)), dtype=torch.float32),
        draft_logits=None if draft is None else torch.tensor(np.log(np.asarray(draft)), dtype=torch.float32),
        draft_token_ids=torch.tensor(ids, dtype=torch.int64),
        cu_num_draft_tokens=torch.tensor([0, k], dtype=torch.int32),
        temperature=torch.tensor([temperature], dtype=torch.float32),
        seeds=torch.tensor([1]), positions=torch.tensor([0]), method=method, want_logprobs=logprobs,
    )


def _output(batch: VerifyBatch, emitted: list[int], logprobs=None) -> VerifyOutput:
    width = batch.max_draft_len + 1
    ids = torch.full((1, width), -1, dtype=torch.int64)
    ids[0, : len(emitted)] = torch.tensor(emitted)
    lp = None
    if logprobs is not None:
        lp = torch.zeros(1, width, dtype=torch.float32)
        lp[0, : len(logprobs)] = torch.tensor(logprobs, dtype=torch.float32)
    return VerifyOutput(ids, torch.tensor([len(emitted)], dtype=torch.int32), lp)


def _classes(batch, out, tally=None) -> list[str]:
    return [v.cls for v in consequence_violations(batch, out, True, tally)]


UNIFORM4 = [0.25, 0.25, 0.25, 0.25]


def test_correction_is_never_the_rejected_point_mass_draft():
    batch = _batch([[0.5, 0.2, 0.2, 0.1], UNIFORM4], None, [0])
    assert _classes(batch, _output(batch, [0])) == ["correction_is_rejected_draft"]
    assert _classes(batch, _output(batch, [1])) == []
    assert _classes(batch, _output(batch, [0, 3])) == []  # accepted, then the bonus


def test_correction_is_never_the_rejected_draft_with_draft_logits():
    # b(0) = 0.3 < q(0) = 0.6: rejection possible; the residual lives on tokens 1, 2
    batch = _batch([[0.3, 0.4, 0.2, 0.1], UNIFORM4], [[0.6, 0.1, 0.1, 0.2]], [0])
    assert _classes(batch, _output(batch, [0])) == ["correction_is_rejected_draft"]
    assert _classes(batch, _output(batch, [3])) == ["correction_outside_residual"]  # b(3) < q(3)
    assert _classes(batch, _output(batch, [2])) == []


def test_token_never_rejects_a_draft_with_larger_target_probability():
    batch = _batch([[0.6, 0.2, 0.1, 0.1], UNIFORM4], [[0.3, 0.3, 0.2, 0.2]], [0])
    assert _classes(batch, _output(batch, [1])) == ["token_rejected_sure_accept"]
    assert _classes(batch, _output(batch, [0, 2])) == []


def test_near_ties_and_underflow_are_not_judged():
    # ratio 1 + 1e-7: a float32 kernel may see it below 1; the rejection is then legal, and so is
    # a correction on token 0 (its float32 residual may be positive)
    tie = _batch([[0.3 * (1 + 1e-7), 0.3, 0.2, 0.2 - 0.3e-7], UNIFORM4], [[0.3, 0.3, 0.2, 0.2]], [0])
    assert _classes(tie, _output(tie, [0])) == []
    # T = 1e-3: b(x) = e^-1000 x ..., q(x) smaller still: both 0 in float32 probability space
    tiny = VerifyBatch(
        target_logits=torch.tensor([[0.0, -1.0, -2.0], [0.0, 0.0, 0.0]]),
        draft_logits=torch.tensor([[0.0, -1.5, -2.0]]),
        draft_token_ids=torch.tensor([1]), cu_num_draft_tokens=torch.tensor([0, 1], dtype=torch.int32),
        temperature=torch.tensor([1e-3]), seeds=torch.tensor([1]), positions=torch.tensor([0]),
    )
    assert _classes(tiny, _output(tiny, [0])) == []


def test_corrections_below_the_mass_floor_are_not_judged():
    # point mass on a token of probability 1 - 1e-8: the residual (1e-8) may be empty in float32
    hot = 1 - 1e-8
    batch = _batch([[hot, 1e-8 / 3, 1e-8 / 3, 1e-8 / 3], UNIFORM4], None, [0])
    tally = Tally()
    assert 1e-8 < MASS_FLOOR and _classes(batch, _output(batch, [0]), tally) == []
    assert tally.counts["corrections not judged (residual below the mass floor)"] == 1


def test_block_correction_lies_in_the_scaled_residual_and_never_where_h_is_zero():
    b = [[0.1, 0.3, 0.3, 0.3], [0.45, 0.40, 0.05, 0.10], UNIFORM4]
    q = [[0.4, 0.2, 0.2, 0.2], [0.05, 0.35, 0.5, 0.10]]  # p_1 = 1/4: (p_1 b_2 - q_2)_+ only on token 0
    batch = _batch(b, q, [0, 2], method="block")
    assert _classes(batch, _output(batch, [0, 1])) == ["correction_outside_residual"]  # token residual
    assert _classes(batch, _output(batch, [0, 0])) == []
    empty = _batch(b, [[0.4, 0.2, 0.2, 0.2], [0.25, 0.25, 0.25, 0.25]], [0, 2], method="block")
    assert _classes(empty, _output(empty, [0, 0])) == ["block_stop_impossible"]  # b_2 <= 2 q_2
    assert _classes(empty, _output(empty, [1])) == []


def test_block_keeps_every_slot_up_to_the_last_sure_pass():
    b = [[0.1, 0.3, 0.3, 0.3], [0.6, 0.2, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4], UNIFORM4]
    q = [[0.2, 0.3, 0.3, 0.2], [0.1, 0.3, 0.3, 0.3], [0.3, 0.3, 0.2, 0.2]]  # p = 1/2, 1, 1/3
    batch = _batch(b, q, [0, 0, 0], method="block")
    assert _classes(batch, _output(batch, [1])) == ["block_rejected_sure_accept"]  # tau 0 < 2
    assert _classes(batch, _output(batch, [0, 1])) == ["block_rejected_sure_accept"]  # tau 1 < 2
    assert _classes(batch, _output(batch, [0, 0, 2])) == []  # tau = 2, a correction where b_3 > q_3


def test_greedy_rows_follow_the_lowest_index_argmax():
    batch = _batch([[0.4, 0.4, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1]], None, [1], temperature=0.0)
    assert _classes(batch, _output(batch, [1, 2])) == ["greedy_not_argmax"]  # 1 ties 0: lowest wins
    assert _classes(batch, _output(batch, [1])) == ["greedy_not_argmax"]
    assert _classes(batch, _output(batch, [0])) == []


@pytest.mark.parametrize("dtype", sorted(LOGPROB_TOLERANCE, key=str))
def test_logprob_value_within_the_dtype_tolerance(dtype):
    batch = _batch([[0.5, 0.2, 0.2, 0.1], UNIFORM4], None, [0], temperature=0.7, logprobs=True)
    batch.target_logits = batch.target_logits.to(dtype)
    rows = batch.target_logits.double().numpy()
    oracle = log_softmax_rows(rows, np.full(2, 0.7))
    want = [float(oracle[0, 0]), float(oracle[1, 3])]
    tol = logprob_tolerance(dtype)
    bounds = [tol.bound(exponent_scale_of_rows(rows[j], 0.7), want[j]) for j in range(2)]
    assert _classes(batch, _output(batch, [0, 3], [want[0] + 0.5 * bounds[0], want[1]])) == []
    found = consequence_violations(batch, _output(batch, [0, 3], [want[0], want[1] - 2 * bounds[1]]), True)
    assert [v.cls for v in found] == ["logprob_value"]
    assert found[0].first_field == "logprobs[0,1]" and found[0].evidence["arithmetic"] == "float32"
    assert found[0].evidence["tolerance"] == pytest.approx(bounds[1])
    # raw logits for the sampled row (T ignored) are far outside the tolerance
    raw = log_softmax_rows(rows, np.ones(2))
    assert _classes(batch, _output(batch, [0, 3], [raw[0, 0], raw[1, 3]])) == ["logprob_value"]


@pytest.mark.parametrize("kernel", [eager_kernel, reference_kernel], ids=["torch_eager", "reference"])
def test_correct_kernels_hold_on_every_anchor_and_each_relation_is_exercised(kernel):
    ctx = cpu_context(seed=3)
    tally = ctx.extra.setdefault("law_consequences_tally", Tally())
    anchors = PROP.anchor_cases(kernel, ctx) + [simple_case(method=m) for m in ("token", "block")]
    for case in anchors:
        assert not PROP.check_guarded(kernel, case, ctx).findings, case.label or case.family
    counts = tally.counts
    for kind in ("logprobs compared", "greedy requests", "rejections judged", "corrections judged",
                 "block scans judged", "block stops judged"):
        assert counts[kind] > 0, (kind, dict(counts))


def test_the_property_reports_its_tolerance_and_judgements():
    result = PROP.run(eager_kernel, cpu_context(seed=0))
    assert result.verdict == "pass", result.note
    assert "logprobs compared" in result.note and "float32: 0.0001 + " in result.note


def test_anchor_batches_build():
    for case in PROP.anchor_cases(eager_kernel, cpu_context()):
        build_batch(case, torch.device("cpu"))


def test_coupled_comparison_uses_the_same_tolerance_table():
    from harness.judging.decision_compare import compare_decisions
    from harness.judging.oracle import reference_draws, run_reference

    batch = _batch([[0.5, 0.2, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]], None, [0], temperature=0.7, logprobs=True)
    ref = run_reference(batch, *reference_draws(batch))
    n = int(ref.num_emitted[0])
    rows = batch.target_logits.double().numpy()
    scale = exponent_scale_of_rows(rows[n - 1], 0.7)
    bound = logprob_tolerance(torch.float32).bound(scale, ref.logprobs[0, n - 1])
    for shift, flagged in ((0.5 * bound, False), (2 * bound, True)):
        lp = list(ref.logprobs[0, :n])
        lp[-1] += shift
        out = _output(batch, list(ref.output_token_ids[0, :n]), lp)
        found = compare_decisions(batch, out, ref, True).real
        assert bool(found) == flagged, (shift, found)
        if flagged:
            assert found[0].kind == "logprob" and found[0].tolerance == pytest.approx(bound)
