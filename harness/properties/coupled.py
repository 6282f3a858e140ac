"""Layer 2: coupled exactness — with the kernel's own uniforms, kernel == oracle, decision by decision.

Claimed by kernels exposing ``random_draws(batch)``. Per case: the draws must have the contract's
shapes and lie strictly inside (0, 1) (a ``u == 0`` accepts zero-probability drafts, BUGS.md #8);
then ``reference.verify.verify_batch`` replays the batch with exactly those uniforms and every
request must match the kernel's output (and logprobs, when asked for and claimed). A disagreement
whose deciding margin is within float32 tolerance is a tie: counted, reported, not a failure
(harness/judging/decision_compare.py). Catches wrong rules, wrong rows, reused or correlated uniforms that
the kernel reports honestly, and everything structural that changes a decision.
"""

from __future__ import annotations

import numpy as np

from harness.contract import capabilities_of, has_random_draws
from harness.execution.kernel_calls import call_random_draws, call_verify
from harness.generation.cases import Case, build_batch
from harness.generation.crafted import crafted_cases
from harness.judging.decision_compare import compare_decisions, uniform_problems
from harness.judging.oracle import reference_draws, run_reference, to_numpy
from harness.judging.output_checks import contract_violations
from harness.properties.base import Finding, RunContext, register
from harness.properties.case_property import CaseCheck, CaseProperty, findings_from


class CoupledExactness(CaseProperty):
    name = "coupled_exactness"
    layer = 2
    summary = "kernel == float64 oracle decision by decision under the kernel's own uniforms"

    def not_claimed_reason(self, kernel: object) -> str | None:
        return None if has_random_draws(kernel) else "the kernel does not expose random_draws(batch)"

    def anchor_cases(self, kernel: object, ctx: RunContext) -> list[Case]:
        """Sampled requests with several drafts and draft logits, for each claimed method: the plain
        workload on which block-verification bugs (break, wrong residual, eta off by one) show, and
        which 12 random examples spread over every dimension reach only rarely."""
        anchors = []
        for method in sorted(getattr(kernel, "methods", ())):
            for j, scale in enumerate((0.5, 1.0, 2.0)):
                seed = ctx.child_seed(self.name, "anchor", method, j) >> 8  # room for + i below
                anchors.append(
                    Case(
                        vocab_size=23,
                        draft_lens=[4, 3, 4, 2, 4, 3],
                        temperatures=[1.0, 0.8, 1.0, 1.3, 1.0, 0.9],
                        seeds=[seed + i for i in range(6)],
                        positions=[0, 7, 2**32 - 2, 1000, 31, 5],
                        family="gaussian",
                        scale=scale,
                        data_seed=seed % (2**32),
                        method=method,
                    )
                )
        if capabilities_of(kernel).greedy and kernel.methods:
            # Greedy rows whose maximum (integer logits 0..2) ties across vocabulary blocks: the
            # lowest index must win even when the tied blocks are combined (BUGS.md class 12).
            # V spans several blocks of the interpreter (256 wide) or of a GPU kernel (ours: 8192).
            seed = ctx.child_seed(self.name, "anchor", "greedy-ties") >> 8
            anchors.append(
                Case(
                    vocab_size=1100 if ctx.device_type == "cpu" else 2 * 8192 + 1100,
                    draft_lens=[2, 1],
                    temperatures=[0.0, 0.0],
                    seeds=[seed, seed + 1],
                    positions=[0, 3],
                    family="ties",
                    data_seed=seed % (2**32),
                    method=sorted(kernel.methods)[0],
                )
            )
        # Rare events placed with chosen seeds (harness/generation/crafted.py): a uniform in the winners'
        # tail,
        # an accept uniform at the inclusive threshold, a block-specific residual.
        return anchors + crafted_cases(getattr(kernel, "methods", ()), capabilities_of(kernel).dtypes)

    def check(self, kernel: object, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        batch = build_batch(case, ctx.device)
        accept, sample = call_random_draws(kernel, batch)
        problems = uniform_problems(batch, accept, sample)
        if problems:
            return CaseCheck([Finding("bad_uniforms", "random_draws", "; ".join(problems))])
        if caps.philox_layout:
            layout = philox_layout_mismatch(batch, accept, sample)
            if layout:
                return CaseCheck([Finding("randomness_layout", layout[0], layout[1])])
        out = call_verify(kernel, batch)
        bad = contract_violations(batch, out, caps.logprobs)
        if bad:
            return CaseCheck(findings_from(bad))
        ref = run_reference(batch, accept, sample)
        comparison = compare_decisions(batch, out, ref, batch.want_logprobs and caps.logprobs)
        real = comparison.real
        if not real:
            return CaseCheck(ties=len(comparison.ties))
        d = real[0]
        cu = batch.cu_num_draft_tokens.cpu().tolist()
        margins = ref.accept_margins[cu[d.request] : cu[d.request + 1]]
        evidence = {
            "request": d.request,
            "decision": d.kind,
            "margin": d.margin,
            "tie_margin": d.tolerance,
            "kernel_tokens": d.kernel_tokens,
            "reference_tokens": d.reference_tokens,
            "margins": [None if np.isnan(m) else float(m) for m in margins],
            "sample_margin": float(ref.sample_margins[d.request]),
            "mismatching_requests": [x.request for x in real],
            "ties": len(comparison.ties),
        }
        message = (
            f"request {d.request}: kernel emitted {d.kernel_tokens}, oracle {d.reference_tokens} "
            f"({d.kind} decision, margin {d.margin:.3g}, tie tolerance {d.tolerance:.3g})"
        )
        return CaseCheck(
            [Finding("coupled_mismatch", d.first_field, message, evidence=evidence)],
            ties=len(comparison.ties),
        )


def philox_layout_mismatch(batch, accept, sample) -> tuple[str, str] | None:
    """``(field, message)`` when the kernel's uniforms differ from ``reference.rng`` by a single bit.

    Only for kernels claiming ``Capabilities.philox_layout``: a wrong counter, stream or uniform
    mapping (for example ``u`` allowed to be 0) changes the stream itself, which decision coupling
    cannot see because it replays whatever uniforms the kernel reports.
    """
    ref_accept, ref_sample = reference_draws(batch)
    pairs = (("accept_uniforms", accept, ref_accept), ("sampling_uniforms", sample, ref_sample))
    for name, got, want in pairs:
        got = to_numpy(got).astype(np.float32).reshape(want.shape)
        differ = np.flatnonzero(got.view(np.uint32).ravel() != want.view(np.uint32).ravel())
        if differ.size:
            i = int(differ[0])
            return (
                f"random_draws.{name}[{i}]",
                f"{differ.size} of {want.size} {name} differ from reference.rng (docs/interfaces.md "
                f"section 1); first at flat index {i}: kernel {got.ravel()[i]!r}, "
                f"reference {want.ravel()[i]!r}",
            )
    return None


register(CoupledExactness())
