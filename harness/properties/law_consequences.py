"""Layer 1: what the exact law fixes once the emitted ids are known, for EVERY kernel, coupled or not.

``law_consequences`` runs the kernel once per case (logprobs asked for whenever the kernel claims
them), passes the output through the structural gate of ``structural`` (contract, values, support)
and then through ``harness.judging.consequences.consequence_violations``: logprobs by value against the
float64 oracle with the tolerance of the logit dtype, greedy rows exactly, and the support relations
of token and block verification (a sure accept is never rejected, a correction lies in its residual,
never the draft just rejected, block never stops where ``h = 0``). A kernel without ``random_draws``
gets these judgements from its own randomness; a kernel with it gets them besides the coupled check.

Besides Hypothesis's cases it judges anchor cases every run: sampled requests with several drafts,
both draft kinds, each claimed method, where rejections, sure accepts and block residuals with
``p_tau < 1`` are common; and greedy requests with exact ties. The property's note counts the
judgements made (``Tally``) and states the logprob tolerance row used.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from harness.contract import VerifyBatch, capabilities_of
from harness.execution.kernel_calls import call_verify
from harness.generation.cases import Case, build_batch, case_from_batch
from harness.generation.strategies import draft_kinds
from harness.judging.consequences import Tally, consequence_violations
from harness.judging.tolerances import LOGPROB_TOLERANCE
from harness.properties.base import Finding, PropertyResult, RunContext, register
from harness.properties.case_property import CaseCheck, CaseProperty, findings_from
from harness.properties.statistical_cases import block_trap_request, greedy_ties_request
from harness.properties.structural import output_violations

TALLY_KEY = "law_consequences_tally"
TRAP_REPLICAS = 32  # per trap case; each trap states its catch rate per replica


def replicated_case(target, draft, ids, temperature: float, method: str, seed: int, replicas: int,
                    label: str) -> Case:
    """One request's rows (``target [g+1, V]``, ``draft [g, V]`` or None, ``ids [g]``) repeated
    ``replicas`` times with seeds drawn from ``seed``, as an explicit case."""
    k = len(ids)
    batch = VerifyBatch(
        target_logits=torch.from_numpy(np.tile(np.asarray(target, np.float32), (replicas, 1))),
        draft_logits=None if draft is None else torch.from_numpy(np.tile(np.asarray(draft, np.float32),
                                                                          (replicas, 1))),
        draft_token_ids=torch.from_numpy(np.tile(np.asarray(ids, np.int64), replicas)),
        cu_num_draft_tokens=torch.arange(replicas + 1, dtype=torch.int32) * k,
        temperature=torch.full((replicas,), temperature, dtype=torch.float32),
        seeds=torch.from_numpy(np.random.default_rng(seed).integers(0, 2**62, size=replicas)),
        positions=torch.arange(replicas, dtype=torch.int64) * 3,
        method=method,
    )
    case = case_from_batch(batch)
    case.label = label
    return case


def block_trap_case(method: str, seed: int) -> Case:
    """The conditional-law suite's block trap (g = 2, V = 6, ``p_1 ~ 0.5``, a likely stop at slot 1
    whose block residual ``(p_1 b_2 - q_2)_+`` lives on one token while the token residual
    ``(b_2 - q_2)_+`` puts 19 % of its mass on a second): a kernel using the token residual there
    emits a token outside the block residual in ~5 % of the requests (80 % to catch it in 32)."""
    r = block_trap_request(np.random.default_rng(seed))
    return replicated_case(r.target, r.draft, r.ids, r.temperature, method, seed, TRAP_REPLICAS,
                           "block trap: p_1 ~ 0.5, a likely stop at slot 1")


def empty_block_residual_case(method: str, seed: int) -> Case:
    """g = 2, V = 4: ``p_1 = 1/4`` and ``b_2 <= 2 q_2``, so ``Z_2 = sum (p_1 b_2 - q_2)_+ = 0``: block
    verification never stops at slot 1 (``h_1 = 0``), while ``sum (b_2 - q_2)_+ = 0.4``: a kernel that
    forgets ``p_1`` in ``Z_2`` stops there in ~1/3 of the requests."""
    rng = np.random.default_rng(seed)
    b = np.array([[0.1, 0.3, 0.3, 0.3], [0.45, 0.45, 0.05, 0.05], [0.4, 0.3, 0.2, 0.1]])
    q = np.array([[0.4, 0.2, 0.2, 0.2], [0.25, 0.25, 0.25, 0.25]])
    jitter = lambda x: np.log(x) + rng.normal(0.0, 1e-3, size=x.shape)  # keeps exact ties away
    return replicated_case(jitter(b), jitter(q), [0, 2], 1.0, method, seed, TRAP_REPLICAS // 2,
                           "empty block residual at slot 1: h_1 = 0")


def clipped_ratio_case(method: str, seed: int) -> Case:
    """g = 2, V = 4: ``r_1 = 2`` (``p_1 = 1`` after the clip, the unclipped product is 2), then a likely
    rejection at slot 2 (``p_2 = 1/4``), where ``(b_2 - q_2)_+`` lives on token 0 only and
    ``(2 b_2 - q_2)_+`` puts 21 % of its mass on tokens 1 and 3: a residual scaled by the unclipped
    product emits one of them in ~16 % of the requests."""
    rng = np.random.default_rng(seed)
    b = np.array([[0.4, 0.2, 0.2, 0.2], [0.5, 0.3, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    q = np.array([[0.2, 0.4, 0.2, 0.2], [0.05, 0.4, 0.4, 0.15]])
    jitter = lambda x: np.log(x) + rng.normal(0.0, 1e-3, size=x.shape)
    return replicated_case(jitter(b), jitter(q), [0, 2], 1.0, method, seed, TRAP_REPLICAS,
                           "clipped ratio: r_1 = 2, a likely stop at slot 1")


def wide_point_mass_case(method: str, seed: int) -> Case:
    """Point drafts beyond a 64-wide tile (V = 150, ids 100 and 130) that the target gives
    probability 1/2: each is rejected half the time, and a residual that failed to zero it would
    emit it again half of those times (~1/4 of the requests)."""
    rng = np.random.default_rng(seed)
    target = rng.normal(0.0, 0.1, size=(3, 150))
    target[0, 100] = target[1, 130] = np.log(149.0)
    return replicated_case(target, None, [100, 130], 1.0, method, seed, TRAP_REPLICAS // 2,
                           "point drafts of probability 1/2 beyond a 64-wide tile")


class LawConsequences(CaseProperty):
    name = "law_consequences"
    layer = 1
    summary = (
        "logprobs by value, greedy rows exactly, sure accepts kept, corrections inside their residual "
        "(never the rejected draft), no block stop where h = 0 -- without coupling"
    )

    def anchor_cases(self, kernel: object, ctx: RunContext) -> list[Case]:
        caps = capabilities_of(kernel)
        anchors = []
        kinds = draft_kinds(caps)
        for method in sorted(getattr(kernel, "methods", ())):
            for has_draft_logits in kinds:
                for scale in (1.0, 2.0):
                    seed = ctx.child_seed(self.name, "anchor", method, has_draft_logits, scale) >> 8
                    anchors.append(Case(
                        vocab_size=19,
                        draft_lens=[4, 3, 4, 2, 4, 3, 4, 1],
                        temperatures=[1.0, 0.7, 1.0, 1.3, 1.0, 0.9, 2.0, 1.5],
                        seeds=[seed + i for i in range(8)],
                        positions=[0, 7, 2**32 - 2, 1000, 31, 5, 9, 2**33],
                        family="gaussian",
                        scale=scale,
                        data_seed=seed % (2**32),
                        method=method,
                        has_draft_logits=has_draft_logits,
                        want_logprobs=caps.logprobs,
                    ))
            if caps.greedy:
                seed = ctx.child_seed(self.name, "anchor", method, "greedy-ties") >> 8
                anchors.append(Case(
                    vocab_size=12, draft_lens=[3, 2, 0, 4], temperatures=[0.0, 0.0, 0.0, 1.0],
                    seeds=[seed + i for i in range(4)], positions=[0, 3, 8, 1], family="ties",
                    data_seed=seed % (2**32), method=method, has_draft_logits=not caps.point_mass_drafts,
                    want_logprobs=caps.logprobs,
                ))
                # the conditional-law suite's greedy request: its last draft ties the maximum at the
                # higher index, so the argmax rule must reject it
                r = greedy_ties_request(np.random.default_rng(seed))
                draft = None if caps.point_mass_drafts else np.zeros((r.gamma, r.vocab))
                anchors.append(replicated_case(r.target, draft, r.ids, 0.0, method, seed, 1,
                                               "greedy: the last draft ties the maximum at a higher index"))
            if method == "block":  # the traps of block verification's own relations
                for trap in (block_trap_case, empty_block_residual_case, clipped_ratio_case):
                    anchors.append(trap(method, ctx.child_seed(self.name, "anchor", trap.__name__)))
            if caps.point_mass_drafts:
                wide_seed = ctx.child_seed(self.name, "anchor", method, "wide")
                anchors.append(wide_point_mass_case(method, wide_seed))
        return [a for a in anchors  # within what the kernel declares
                if a.vocab_size <= caps.max_vocab and max(a.draft_lens, default=0) <= caps.max_draft_len]

    def check(self, kernel: object, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        batch = build_batch(replace(case, want_logprobs=caps.logprobs), ctx.device)
        out = call_verify(kernel, batch)
        gate = output_violations(batch, out, caps.logprobs)
        if gate:
            return CaseCheck(findings_from(gate))
        tally = ctx.extra.setdefault(TALLY_KEY, Tally())
        broken = consequence_violations(batch, out, caps.logprobs, tally, caps.greedy_ties)
        return CaseCheck([Finding(b.cls, b.first_field, b.message, evidence=b.evidence) for b in broken[:1]])

    def run(self, kernel: object, ctx: RunContext) -> PropertyResult:
        ctx.extra[TALLY_KEY] = Tally()
        result = super().run(kernel, ctx)
        counts = ctx.extra.pop(TALLY_KEY).counts
        caps = capabilities_of(kernel)
        tolerance = "; ".join(
            f"{str(d).replace('torch.', '')}: {t.atol:g} + {t.rtol:.3g} (S + |lp|)"
            for d, t in LOGPROB_TOLERANCE.items() if d in caps.dtypes
        )
        judged = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        extra = f"judged: {judged or 'nothing'}" + (
            f"; logprob tolerance ({tolerance})" if caps.logprobs else "; logprobs not claimed"
        )
        result.note = f"{result.note}; {extra}" if result.note else extra
        return result


register(LawConsequences())
