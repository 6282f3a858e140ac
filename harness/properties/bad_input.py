"""Layer 5: bad input gets a clear error, or the documented outcome; never an out-of-range id or write.

- ``bad_input_errors`` (claimed with ``raises_on_bad_input``): every malformation of
  harness/generation/malformations.py must raise ``ValueError`` or ``TypeError``. Accepting it, or failing
  with
  some other exception (an ``IndexError`` from deep inside, a CUDA error), is a failure.
- ``bad_input_after_good_call`` (same claim): a well-formed batch is verified, then EVERY malformation
  of that batch's layout, each judged as above. A kernel that keeps per-layout state (a call plan, a
  cache of checked shapes) and lets a check lapse for a layout it has seen fails here.
- ``degenerate_rows_outcome`` (claimed by every kernel): NaN, ``+inf`` and all ``-inf`` rows either
  raise ``ValueError`` (validating kernels) or give the outcome docs/interfaces.md section 3
  documents: contract shapes, ``num_emitted`` in ``[1, k + 1]``, accepted prefix == drafts, emitted ids
  in ``[0, V)``, ``-1`` padding, and no write into the guard bands around the inputs.
- Kernels claiming ``draft_padding_minus_one`` document ``-1`` draft ids as legal padding (a token of
  probability 0): for them a ``-1`` draft moves from the first catalogue to the second, and accepting
  it shows up as an emitted id outside ``[0, V)``.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from harness.contract import capabilities_of
from harness.execution.guard_bands import guarded_batch
from harness.execution.kernel_calls import KernelRaised, call_verify
from harness.generation.cases import Case, build_batch
from harness.generation.malformations import (
    DEGENERATIONS,
    MALFORMATIONS,
    MINUS_ONE_PADDING,
    NEEDS_DRAFTS,
    as_case,
)
from harness.generation.strategies import CaseSpace, cases
from harness.judging.output_checks import contract_violations, guard_violations, value_violations
from harness.properties.base import Finding, RunContext, register
from harness.properties.case_property import CaseCheck, CaseProperty, findings_from

CLEAR_ERRORS = (ValueError, TypeError)


def _labelled_cases(space: CaseSpace, catalogue: dict) -> st.SearchStrategy[Case]:
    """A catalogue entry applied to a drawn case (entries about drafts get at least one draft)."""

    @st.composite
    def draw(data) -> Case:
        name = data(st.sampled_from(sorted(catalogue)))
        needs = replace(space, min_draft=1) if name in NEEDS_DRAFTS else space
        if name.startswith("draft_row"):
            needs = replace(needs, min_draft=1, draft_logits=(True,))
        return as_case(data(cases(needs)), name, catalogue[name])

    return draw()


class _SmallCases(CaseProperty):
    """Bad-input cases are stored verbatim in reports, so they are kept small."""

    def space(self, kernel, ctx: RunContext) -> CaseSpace:
        space = super().space(kernel, ctx)
        return replace(
            space,
            max_vocab=min(space.max_vocab, 64),
            max_reqs=min(space.max_reqs, 3),
            max_draft=min(space.max_draft, 3),
        )


class BadInputErrors(_SmallCases):
    name = "bad_input_errors"
    layer = 5
    summary = "malformed batches raise ValueError/TypeError"

    def not_claimed_reason(self, kernel):
        return (
            None
            if capabilities_of(kernel).raises_on_bad_input
            else "the kernel does not claim to validate its input"
        )

    def strategy(self, kernel, ctx):
        return _labelled_cases(self.space(kernel, ctx), self.catalogue(kernel))

    @staticmethod
    def catalogue(kernel) -> dict:
        """Every malformation, except -1 drafts for kernels documenting them as padding."""
        padding = capabilities_of(kernel).draft_padding_minus_one
        return {k: v for k, v in MALFORMATIONS.items() if not (padding and k == MINUS_ONE_PADDING)}

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        if case.label and case.label not in self.catalogue(kernel):
            return CaseCheck(skipped=f"{case.label} is documented as legal for this kernel")
        batch = build_batch(case, ctx.device)
        try:
            call_verify(kernel, batch)
        except KernelRaised as exc:
            if isinstance(exc.error, CLEAR_ERRORS):
                return CaseCheck()
            return CaseCheck(
                [
                    Finding(
                        "unclear_error",
                        case.label,
                        f"{case.label}: raised {type(exc.error).__name__} ({exc.error}), "
                        f"expected ValueError or TypeError",
                        evidence={"traceback": exc.trace},
                    )
                ]
            )
        return CaseCheck(
            [
                Finding(
                    "accepted_malformed_input",
                    case.label,
                    f"{case.label}: the kernel returned normally on a malformed batch",
                )
            ]
        )


class BadInputAfterGoodCall(_SmallCases):
    name = "bad_input_after_good_call"
    layer = 5
    summary = "after a well-formed call, every malformation of its layout raises ValueError/TypeError"

    def not_claimed_reason(self, kernel):
        return _BAD_INPUT_ERRORS.not_claimed_reason(kernel)

    def strategy(self, kernel, ctx):
        return cases(replace(self.space(kernel, ctx), min_draft=1))  # every draft malformation applies

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        try:
            call_verify(kernel, build_batch(case, ctx.device))
        except KernelRaised as exc:
            return CaseCheck(
                [
                    Finding(
                        "refused_wellformed_batch",
                        "well-formed batch",
                        f"the well-formed batch raised {type(exc.error).__name__} ({exc.error})",
                        evidence={"traceback": exc.trace},
                    )
                ]
            )
        findings = []
        for name, transform in sorted(BadInputErrors.catalogue(kernel).items()):
            bad = as_case(case, name, transform, ctx.device)
            for finding in _BAD_INPUT_ERRORS.check(kernel, bad, ctx).findings:
                finding.message += " (right after a well-formed call of the same layout)"
                finding.evidence = {**(finding.evidence or {}), "malformed_case": bad.to_dict()}
                findings.append(finding)
        return CaseCheck(findings)


class DegenerateRowsOutcome(_SmallCases):
    name = "degenerate_rows_outcome"
    layer = 5
    summary = "NaN/inf rows: documented outcome (ids in range, no out-of-bounds write) or ValueError"

    def strategy(self, kernel, ctx):
        catalogue = dict(DEGENERATIONS)
        if capabilities_of(kernel).draft_padding_minus_one:  # legal padding: never accepted
            catalogue[MINUS_ONE_PADDING] = MALFORMATIONS[MINUS_ONE_PADDING]
        return _labelled_cases(self.space(kernel, ctx), catalogue)

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        batch, guards = guarded_batch(build_batch(case, ctx.device))
        try:
            out = call_verify(kernel, batch)
        except KernelRaised as exc:
            if isinstance(exc.error, ValueError):
                return CaseCheck()
            raise
        broken = guard_violations(guards, "write_outside_inputs", f"{case.label}: the kernel")
        if broken:
            return CaseCheck(findings_from(broken))
        bad = contract_violations(batch, out, caps.logprobs)
        if not bad:
            bad = value_violations(batch, out, False)
        for v in bad:
            v.message = f"{case.label}: {v.message}"
        return CaseCheck(findings_from(bad))


_BAD_INPUT_ERRORS = register(BadInputErrors())
register(BadInputAfterGoodCall())
register(DegenerateRowsOutcome())
