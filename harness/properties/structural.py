"""Layer 1: structural invariants of every output, inputs left untouched, repeatable results.

``structural`` runs the kernel up to three times per case:
1. on a clean copy of the batch, after poisoning the allocator: the output must meet the contract
   (types, shapes, ``num_emitted`` range, accepted prefix == drafts, ids in ``[0, V)``, ``-1``
   padding, logprobs finite and ``<= 0`` with ``0.0`` padding), must never accept or emit a token the
   target gives probability 0, and the inputs must be bit-for-bit unchanged;
2. on the same batch with every input a view into a poison-guarded buffer: the guards must be
   unchanged (no out-of-bounds writes) and the output identical to run 1 (no out-of-bounds reads, no
   nondeterminism; a third, plain run tells the two apart when they differ);
3. for kernels that write into caller buffers (``verify_into``): into poisoned, guard-banded outputs,
   which must equal run 1 with every guard intact.
"""

from __future__ import annotations

import torch

from harness.contract import BATCH_TENSOR_FIELDS, VerifyBatch, VerifyOutput, capabilities_of
from harness.execution.guard_bands import guarded_batch, guarded_outputs, poison_allocator
from harness.execution.kernel_calls import call_verify, call_verify_into
from harness.generation.cases import Case, build_batch
from harness.judging.output_checks import (
    Violation,
    contract_violations,
    first_difference,
    guard_violations,
    support_violations,
    value_violations,
)
from harness.properties.base import Finding, RunContext, register
from harness.properties.case_property import CaseCheck, CaseProperty, findings_from


def modified_inputs(before: VerifyBatch, after: VerifyBatch) -> list[str]:
    """Names of input tensors whose bits changed (NaN compares equal to NaN)."""
    changed = []
    for name in BATCH_TENSOR_FIELDS:
        a, b = getattr(before, name), getattr(after, name)
        if a is None and b is None:
            continue
        if (a is None) != (b is None) or a.shape != b.shape:
            changed.append(name)
            continue
        same = a == b
        if a.is_floating_point():
            same |= torch.isnan(a) & torch.isnan(b)
        if not bool(same.all()):
            changed.append(name)
    return changed


def output_violations(batch: VerifyBatch, out: object, logprobs_claimed: bool) -> list[Violation]:
    """Every layer-1 violation of one output (contract first; values only if the contract holds)."""
    bad = contract_violations(batch, out, logprobs_claimed)
    if bad:
        return bad
    return value_violations(batch, out, logprobs_claimed) + support_violations(batch, out)


class Structural(CaseProperty):
    name = "structural"
    layer = 1
    chunk_budgets = True
    summary = (
        "contract, padding, prefix, id range, zero-probability support, inputs unchanged, guards, determinism"
    )

    def check(self, kernel: object, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        batch = build_batch(case, ctx.device)
        pristine = batch.clone()
        poison_allocator(batch.device)
        out = call_verify(kernel, batch)
        bad = output_violations(batch, out, caps.logprobs)
        changed = modified_inputs(pristine, batch)
        if changed:
            bad.append(Violation("input_modified", changed[0], f"the kernel modified its inputs: {changed}"))
        if bad:
            return CaseCheck(findings_from(bad))
        with_lp = batch.want_logprobs and caps.logprobs

        guarded, guards = guarded_batch(pristine)
        again = call_verify(kernel, guarded)
        broken = guard_violations(guards, "write_outside_inputs", "the kernel")
        if broken:
            return CaseCheck(findings_from(broken))
        diff = self._differs(batch, out, again, caps.logprobs, with_lp)
        if diff:
            plain = call_verify(kernel, pristine.clone())
            if self._differs(batch, out, plain, caps.logprobs, with_lp):
                return CaseCheck([Finding("nondeterministic", diff, "two runs on identical inputs differ")])
            return CaseCheck(
                [
                    Finding(
                        "read_outside_inputs",
                        diff,
                        "the output changed when the inputs' neighbouring memory was poisoned",
                    )
                ]
            )

        if caps.output_buffers and callable(getattr(kernel, "verify_into", None)):
            target, out_guards = guarded_outputs(batch, with_lp)
            call_verify_into(kernel, pristine.clone(), target)
            broken = guard_violations(out_guards, "write_outside_outputs", "verify_into")
            if broken:
                return CaseCheck(findings_from(broken))
            diff = first_difference(out, target, with_lp)
            if diff:
                return CaseCheck(
                    [
                        Finding(
                            "unwritten_output",
                            diff,
                            "verify_into into poisoned buffers differs from verify: "
                            "a slot was left unwritten",
                        )
                    ]
                )
        return CaseCheck()

    @staticmethod
    def _differs(
        batch: VerifyBatch, ref: VerifyOutput, other: object, logprobs_claimed: bool, with_lp: bool
    ) -> str | None:
        bad = contract_violations(batch, other, logprobs_claimed)
        if bad:
            return bad[0].first_field
        return first_difference(ref, other, with_lp)


register(Structural())
