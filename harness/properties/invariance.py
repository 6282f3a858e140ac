"""Layer 3: invariances and identities (SPEC.md section 5), each comparing the kernel with itself.

Every property runs the kernel on a case and on a transformed case whose answer must be the same,
bit for bit, because per-request randomness is keyed by (seed, position) only:

- ``batch_invariance``: a random permutation of the requests, and a random subset of them (other
  batch mates), give each request the same output (BUGS.md #2, #17: rows or randomness keyed by
  batch index);
- ``chunk_invariance``: a chunk budget (1 byte .. many rows) gives the unchunked output (#16, #17);
- ``logit_shift``: adding a per-row constant to the logits changes nothing (overflowing ``exp``
  without max subtraction, #13). Logits are put on a grid and temperatures on powers of two so that
  the shifted computation is exact in the logits' dtype: any change is a bug, not rounding;
- ``single_draft_block_equals_token``: with ``g <= 1``, block verification == token verification;
- ``point_mass_identity``: ``draft_logits=None`` == one-hot draft logits on the draft tokens;
- ``greedy_identity``: greedy requests (in mixed batches) equal the oracle's greedy decisions
  exactly, whatever the method, seeds, positions or draft logits (#12, #13);
- ``equal_models_accept_all``: when draft logits equal the target rows (``p == q``) every sampled
  draft is accepted (SPEC.md 5.6; also the ``0/0`` convention of block verification).

Where exact arithmetic agrees but float rounding may not (block vs token, point mass vs one-hot),
a difference at a request whose oracle margins are near a threshold is counted as a tie (only
possible for kernels exposing ``random_draws``).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from harness.contract import VerifyBatch, capabilities_of, has_random_draws
from harness.execution.kernel_calls import call_random_draws, call_verify
from harness.generation.batch_edit import (
    exact_shift_grid,
    one_hot_draft_logits,
    quantised,
    request_output,
    select_requests,
    shifted_rows,
)
from harness.generation.cases import Case, build_batch
from harness.generation.strategies import CaseSpace
from harness.judging.decision_compare import near_tie_requests
from harness.judging.oracle import reference_draws, run_reference, to_numpy
from harness.judging.output_checks import contract_violations
from harness.properties.base import Finding, RunContext, register
from harness.properties.case_property import CaseCheck, CaseProperty, findings_from
from reference.probs import effective_temperature, softmax_rows


def run_checked(kernel: object, batch: VerifyBatch, logprobs_claimed: bool):
    """Run the kernel (this module's properties and ``layout_reuse``); return ``(output, None)``, or
    ``(None, CaseCheck)`` when the contract is broken."""
    out = call_verify(kernel, batch)
    bad = contract_violations(batch, out, logprobs_claimed)
    return (None, CaseCheck(findings_from(bad))) if bad else (out, None)


def _run_both(kernel: object, batch_a: VerifyBatch, batch_b: VerifyBatch, logprobs_claimed: bool):
    """Run the kernel on both batches; ``(out_a, out_b, None)`` or ``(None, None, CaseCheck)`` when the
    contract is broken."""
    out_a, broken = run_checked(kernel, batch_a, logprobs_claimed)
    if broken:
        return None, None, broken
    out_b, broken = run_checked(kernel, batch_b, logprobs_claimed)
    return (None, None, broken) if broken else (out_a, out_b, None)


def _first_request_difference(
    out_a, rows_a: list[int], out_b, rows_b: list[int], with_lp: bool
) -> int | None:
    """Index ``i`` of the first pair ``(rows_a[i], rows_b[i])`` whose requests' outputs differ."""
    for i, (ra, rb) in enumerate(zip(rows_a, rows_b, strict=True)):
        if request_output(out_a, ra, with_lp) != request_output(out_b, rb, with_lp):
            return i
    return None


def same_requests(cls: str, what: str, out_a, out_b, num_reqs: int, with_lp: bool) -> Finding | None:
    """A ``cls`` finding for the first request whose outputs differ between ``out_a`` and ``out_b``."""
    rows = list(range(num_reqs))
    i = _first_request_difference(out_a, rows, out_b, rows, with_lp)
    return None if i is None else _difference_finding(cls, what, out_a, i, out_b, i, with_lp)


def _difference_finding(cls: str, what: str, out_a, ra: int, out_b, rb: int, with_lp: bool) -> Finding:
    a, b = request_output(out_a, ra, with_lp), request_output(out_b, rb, with_lp)
    return Finding(
        cls,
        f"output_token_ids[{ra}]",
        f"{what}: request {ra} gave {a[1]} but {b[1]}",
        evidence={
            "request": ra,
            "original": list(a[1]),
            "transformed": list(b[1]),
            "original_logprobs": list(a[2]),
            "transformed_logprobs": list(b[2]),
        },
    )


class BatchInvariance(CaseProperty):
    name = "batch_invariance"
    layer = 3
    summary = "a request's output does not depend on its batch position or its batch mates"

    def space(self, kernel, ctx) -> CaseSpace:
        space = super().space(kernel, ctx)
        if capabilities_of(kernel).randomness_per_request or not capabilities_of(kernel).greedy:
            return space
        return replace(space, temperature_bands=("greedy", "normal"))  # half the requests judged

    def not_claimed_reason(self, kernel):
        caps = capabilities_of(kernel)
        if not caps.randomness_per_request and not caps.greedy:
            return "its randomness depends on the batch slot and it has no greedy rows to judge"
        return None

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        batch = build_batch(case, ctx.device)
        if batch.num_reqs < 2:
            return CaseCheck(skipped="needs at least two requests")
        with_lp = batch.want_logprobs and caps.logprobs
        out, broken = run_checked(kernel, batch, caps.logprobs)
        if broken:
            return broken
        rng = np.random.default_rng(case.data_seed)
        order = [int(i) for i in rng.permutation(batch.num_reqs)]
        size = int(rng.integers(1, batch.num_reqs))
        subset = [int(i) for i in rng.choice(batch.num_reqs, size=size, replace=False)]
        # Randomness keyed by the batch slot (Capabilities.randomness_per_request False): only greedy
        # requests must keep their output when they move.
        greedy = (batch.temperature == 0).tolist()
        judged = (lambda r: True) if caps.randomness_per_request else (lambda r: greedy[r])
        if not any(judged(r) for r in range(batch.num_reqs)):
            return CaseCheck(skipped="no greedy request (this kernel's randomness depends on the batch slot)")
        for cls, what, picked in (
            ("batch_order", "permuting the batch", order),
            ("batch_mates", f"running requests {subset} without their batch mates", subset),
        ):
            other, broken = run_checked(kernel, select_requests(batch, picked), caps.logprobs)
            if broken:
                return broken
            kept = [j for j, r in enumerate(picked) if judged(r)]
            i = _first_request_difference(out, [picked[j] for j in kept], other, kept, with_lp)
            i = None if i is None else kept[i]
            if i is not None:
                f = _difference_finding(cls, what, out, picked[i], other, i, with_lp)
                f.evidence["order"] = picked
                return CaseCheck([f])
        return CaseCheck()


class ChunkInvariance(CaseProperty):
    name = "chunk_invariance"
    layer = 3
    chunk_budgets = True
    summary = "any chunk budget gives the unchunked output bit for bit"

    def not_claimed_reason(self, kernel):
        return None if capabilities_of(kernel).chunking else "the kernel does not claim chunking"

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        if case.max_chunk_bytes is None:
            case = replace(case, max_chunk_bytes=1)
        chunked = build_batch(case, ctx.device)
        with_lp = chunked.want_logprobs and caps.logprobs
        out_c, out_u, broken = _run_both(
            kernel, chunked, replace(chunked, max_chunk_bytes=None), caps.logprobs
        )
        if broken:
            return broken
        what = f"max_chunk_bytes={case.max_chunk_bytes} vs unbounded"
        f = same_requests("chunk_dependence", what, out_u, out_c, chunked.num_reqs, with_lp)
        if f is None:
            return CaseCheck()
        f.evidence["max_chunk_bytes"] = case.max_chunk_bytes
        return CaseCheck([f])


def _power_of_two(t: float, min_temperature: float = 0.0) -> float:
    """The power of two nearest ``t``, the next one up where that leaves the kernel's domain."""
    if t == 0.0:
        return 0.0
    exponent = round(math.log2(t))
    while 2.0**exponent < min_temperature:
        exponent += 1
    return float(2.0**exponent)


class LogitShift(CaseProperty):
    name = "logit_shift"
    layer = 3
    summary = "adding a constant to any logits row changes nothing (computed exactly on a grid)"

    def anchor_cases(self, kernel, ctx: RunContext) -> list[Case]:
        """One float32 case per claimed method, every run: float32 is the dtype whose grid leaves
        room for shifts in the thousands (``exact_shift_grid``), where a kernel that exponentiates
        without subtracting the row maximum saturates. A run's palette of shapes
        (harness/generation/shape_palette.py) gives float32 to a third of its shapes, which twelve examples
        may all miss."""
        caps = capabilities_of(kernel)
        if torch.float32 not in caps.dtypes:
            return []
        anchors, k = [], min(3, caps.max_draft_len)
        for method in sorted(getattr(kernel, "methods", ())):
            seed = ctx.child_seed(self.name, "anchor", method) >> 8
            anchors.append(Case(
                vocab_size=min(13, caps.max_vocab), draft_lens=[min(2, k), min(1, k), k],
                temperatures=[1.0, 0.5, 2.0], seeds=[seed, seed + 1, seed + 2], positions=[0, 9, 2**32 - 1],
                family="gaussian", scale=3.0, data_seed=seed % (2**32), method=method,
                # token: draft logits where claimed; block: point drafts where claimed
                has_draft_logits=(method == "token" and caps.draft_logits) or not caps.point_mass_drafts,
            ))
        return anchors

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        case = replace(case, temperatures=[_power_of_two(t, caps.min_temperature) for t in case.temperatures])
        base = build_batch(case, ctx.device)
        step, bound, max_shift = exact_shift_grid(base.target_logits.dtype)
        rng = np.random.default_rng(case.data_seed ^ 0x5EED)
        grid_shift = lambda n: torch.from_numpy(
            rng.integers(-int(max_shift / step), int(max_shift / step) + 1, size=n) * step
        ).to(base.device)
        base = replace(
            base,
            target_logits=quantised(base.target_logits, step, bound),
            draft_logits=None if base.draft_logits is None else quantised(base.draft_logits, step, bound),
        )
        shifted = replace(
            base,
            target_logits=shifted_rows(base.target_logits, grid_shift(base.num_logits)),
            draft_logits=None
            if base.draft_logits is None
            else shifted_rows(base.draft_logits, grid_shift(base.num_draft_total)),
        )
        with_lp = base.want_logprobs and caps.logprobs
        out_a, out_b, broken = _run_both(kernel, base, shifted, caps.logprobs)
        if broken:
            return broken
        what = "shifting logits rows by constants"
        f = same_requests("shift_dependence", what, out_a, out_b, base.num_reqs, with_lp)
        return CaseCheck() if f is None else CaseCheck([f])


def _excused(kernel, batch: VerifyBatch, request: int) -> bool:
    """Whether a difference at ``request`` may be float rounding (needs the kernel's uniforms)."""
    if not has_random_draws(kernel):
        return False
    accept, sample = call_random_draws(kernel, batch)
    return request in near_tie_requests(batch, run_reference(batch, accept, sample))


def _compare_two(kernel, batch_a: VerifyBatch, batch_b: VerifyBatch, cls: str, what: str) -> CaseCheck:
    caps = capabilities_of(kernel)
    with_lp = batch_a.want_logprobs and caps.logprobs
    out_a, out_b, broken = _run_both(kernel, batch_a, batch_b, caps.logprobs)
    if broken:
        return broken
    ties = 0
    for r in range(batch_a.num_reqs):
        if request_output(out_a, r, with_lp) == request_output(out_b, r, with_lp):
            continue
        if _excused(kernel, batch_a, r):
            ties += 1
            continue
        return CaseCheck([_difference_finding(cls, what, out_a, r, out_b, r, with_lp)], ties=ties)
    return CaseCheck(ties=ties)


class SingleDraftBlockEqualsToken(CaseProperty):
    name = "single_draft_block_equals_token"
    layer = 3
    summary = "with g <= 1 block verification decides exactly as token verification"

    def not_claimed_reason(self, kernel):
        return (
            None
            if {"token", "block"} <= set(kernel.methods)
            else "the kernel does not implement both methods"
        )

    def space(self, kernel, ctx) -> CaseSpace:
        return replace(super().space(kernel, ctx), max_draft=1, methods=("token",))

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        token = build_batch(replace(case, method="token"), ctx.device)
        return _compare_two(
            kernel,
            token,
            replace(token, method="block"),
            "block_differs_from_token",
            "token vs block verification with one draft",
        )


class PointMassIdentity(CaseProperty):
    name = "point_mass_identity"
    layer = 3
    summary = "draft_logits=None equals one-hot draft logits on the draft tokens"

    def not_claimed_reason(self, kernel):
        caps = capabilities_of(kernel)
        if not caps.point_mass_drafts:
            return "the kernel does not accept point-mass drafts"
        return None if caps.draft_logits else "the kernel does not accept draft logits (target-only)"

    def space(self, kernel, ctx) -> CaseSpace:
        return replace(super().space(kernel, ctx), draft_logits=(False,))

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        point = build_batch(replace(case, has_draft_logits=False), ctx.device)
        return _compare_two(
            kernel,
            point,
            replace(point, draft_logits=one_hot_draft_logits(point)),
            "point_mass_differs",
            "draft_logits=None vs one-hot draft logits",
        )


def _valid_under_any_tie(batch, r: int, got: list[int]) -> bool:
    """Request ``r``'s greedy output is valid under the "any maximum" tie rule (harness/judging/
    consequences.py ``greedy_output_ok``)."""
    from harness.judging.consequences import greedy_output_ok

    cu = batch.cu_num_draft_tokens.cpu().tolist()
    start, end = cu[r], cu[r + 1]
    rows = batch.target_logits[start + r : end + r + 1].detach().cpu().double().numpy()
    drafts = batch.draft_token_ids[start:end].cpu().tolist()
    return greedy_output_ok(rows, drafts, got, "any")


class GreedyIdentity(CaseProperty):
    name = "greedy_identity"
    layer = 3
    summary = ("greedy requests follow the argmax rule exactly, whatever method, seeds or draft logits "
               "(under a kernel's \"any maximum\" tie rule, Capabilities.greedy_ties: a valid greedy output)")

    def not_claimed_reason(self, kernel):
        return None if capabilities_of(kernel).greedy else "the kernel does not claim greedy (T == 0) rows"

    def space(self, kernel, ctx) -> CaseSpace:
        # Half the requests greedy (the rest sampled: mixed batches), and exact ties drawn often
        # enough for the lowest-index tie-break to be exercised within a CI-sized run.
        families = ("ties", "gaussian", "one_hot", "masked", "huge", "all_negative")
        return replace(super().space(kernel, ctx), temperature_bands=("greedy", "normal"), families=families)

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        batch = build_batch(case, ctx.device)
        greedy = [r for r, t in enumerate(case.temperatures) if t == 0.0]
        if not greedy:
            return CaseCheck(skipped="no greedy request")
        accept, sample = reference_draws(batch)  # greedy decisions use no randomness
        ref = run_reference(batch, accept, sample)
        rng = np.random.default_rng(case.data_seed ^ 0x6EED)
        n = batch.num_reqs
        variants = [("as drawn", batch)]
        other_method = "block" if batch.method == "token" else "token"
        if other_method in kernel.methods:
            variants.append(("the other method", replace(batch, method=other_method)))
        if (batch.draft_logits is not None and caps.point_mass_drafts) or not caps.draft_logits:
            new_draft = None
        else:
            new_draft = torch.from_numpy(rng.normal(size=(batch.num_draft_total, batch.vocab_size))).to(
                device=batch.device, dtype=batch.target_logits.dtype
            )
        variants.append(
            (
                "other seeds, positions and draft logits",
                replace(
                    batch,
                    draft_logits=new_draft,
                    seeds=torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64)).to(
                        batch.device
                    ),
                    positions=torch.from_numpy(rng.integers(0, 2**40, size=n, dtype=np.int64)).to(
                        batch.device
                    ),
                ),
            )
        )
        for what, variant in variants:
            out, broken = run_checked(kernel, variant, caps.logprobs)
            if broken:
                return broken
            for r in greedy:
                n_k = int(out.num_emitted[r])
                got = out.output_token_ids[r, :n_k].tolist()
                want = ref.output_token_ids[r, : int(ref.num_emitted[r])].tolist()
                if got != want and caps.greedy_ties == "any" and _valid_under_any_tie(variant, r, got):
                    continue  # a tie broken another way: valid, and the rule allows it to vary
                if got != want:
                    j = next(
                        (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                        min(len(got), len(want)),
                    )
                    return CaseCheck(
                        [
                            Finding(
                                "greedy_mismatch",
                                f"output_token_ids[{r},{j}]",
                                f"greedy request {r} ({what}) emitted {got}, the argmax rule gives {want}",
                                evidence={
                                    "request": r,
                                    "variant": what,
                                    "kernel_tokens": got,
                                    "reference_tokens": want,
                                },
                            )
                        ]
                    )
        return CaseCheck()


class EqualModelsAcceptAll(CaseProperty):
    name = "equal_models_accept_all"
    layer = 3
    summary = "draft logits equal to the target rows (p == q): every sampled draft is accepted"

    def not_claimed_reason(self, kernel):
        return None if capabilities_of(kernel).draft_logits else "the kernel does not accept draft logits"

    def space(self, kernel, ctx) -> CaseSpace:
        space = super().space(kernel, ctx)
        bands = tuple(b for b in space.temperature_bands if b != "greedy") or ("normal",)
        return replace(space, families=("equal",), draft_logits=(True,), temperature_bands=bands, min_draft=1)

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        case = replace(case, family="equal", has_draft_logits=True)
        batch = build_batch(case, ctx.device)
        target = to_numpy(batch.target_logits).astype(np.float64)
        temps = to_numpy(batch.temperature).astype(np.float64)
        cu = batch.cu_num_draft_tokens.tolist()
        ids = batch.draft_token_ids.tolist()
        out, broken = run_checked(kernel, batch, caps.logprobs)
        if broken:
            return broken
        for r in range(batch.num_reqs):
            k = cu[r + 1] - cu[r]
            if temps[r] == 0.0 or k == 0:
                continue
            rows = target[cu[r] + r : cu[r + 1] + r]
            probs = softmax_rows(rows, effective_temperature(np.full(k, temps[r])))
            if probs[np.arange(k), ids[cu[r] : cu[r + 1]]].min() < 1e-30:
                continue  # a draft token whose probability underflows: acceptance is float luck
            n = int(out.num_emitted[r])
            if n != k + 1:
                return CaseCheck(
                    [
                        Finding(
                            "rejected_with_equal_models",
                            f"num_emitted[{r}]",
                            f"request {r}: p == q yet only {n - 1} of {k} drafts were accepted",
                            evidence={"request": r, "num_emitted": n, "draft_len": k},
                        )
                    ]
                )
        return CaseCheck()


for _prop in (
    BatchInvariance(),
    ChunkInvariance(),
    LogitShift(),
    SingleDraftBlockEqualsToken(),
    PointMassIdentity(),
    GreedyIdentity(),
    EqualModelsAcceptAll(),
):
    register(_prop)
