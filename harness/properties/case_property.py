"""Case-by-case properties (layers 1, 2, 3 and 5) driven by Hypothesis, with bounded shrinking.

A ``CaseProperty`` judges one ``Case`` at a time with ``check(kernel, case, ctx) -> CaseCheck``: that
is the unit the regression corpus replays and pytest parametrises. ``run`` searches for a failing
case with Hypothesis (``profile.max_examples`` examples, seeded from the run seed, no example
database, so a run is reproducible from ``--seed``) and shrinks it toward the smallest batch, but
spends at most ``profile.shrink_calls`` calls / ``profile.shrink_seconds`` on shrinking: after that
only the best failing case seen so far keeps failing, so Hypothesis stops.

Kernel faults are findings, not crashes: ``KernelRaised`` fails the case with the error text;
``DeviceFault`` also stops the property at once (nothing more can run in this process) and sets
``ctx.extra["device_fault"]`` for the runner. ``KernelFault`` (a supervised call crashed or hung its
worker, harness/execution/supervisor.py) fails the case with a ``crash`` or ``hang`` finding whose ``repro``
runs
that one case in the foreground (``replay --case ... --in-process``, for a debugger); the next call
gets a fresh worker, so the search and its shrinking go on.

A hang is paid once per shape: the shape of a case that hung (``hang_shape``: what a compiled kernel
specialises on, harness/generation/shape_palette.py) is remembered for the run
(``ctx.extra[HUNG_SHAPES_KEY]``), and every other property's cases of that shape are cut without a
call (skipped, counted in the note). The first property of the run to find a hang shrinks it (the
minimal hanging case); a later property that hangs on another shape stops with its finding.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from harness.contract import capabilities_of
from harness.execution.kernel_calls import DeviceFault, KernelFault, KernelRaised
from harness.generation.cases import Case
from harness.generation.shape_palette import FEW_REQUESTS, palette
from harness.generation.strategies import CaseSpace, cases, coverage_of, in_temperature_domain
from harness.judging.output_checks import Violation
from harness.properties.base import (
    ERROR,
    FAIL,
    NOT_CLAIMED,
    PASS,
    SKIPPED,
    Finding,
    PropertyResult,
    RunContext,
)
from harness.timing.budget import BudgetSpent, budget_note, deadline_passed


@dataclass
class CaseCheck:
    """The verdict on one case: findings (empty = pass), tie count, and what was compared."""

    findings: list[Finding] = field(default_factory=list)
    ties: int = 0
    skipped: str = ""  # non-empty: the case does not apply (e.g. no sampled request); not counted


def outside_domain(case: Case, kernel: object) -> str:
    """Why ``case`` lies outside the kernel's declared domain, or ``""``."""
    caps = capabilities_of(kernel)
    if case.has_draft_logits and not caps.draft_logits and case.draft_lens and max(case.draft_lens) > 0:
        return "draft logits outside the kernel's domain (a target-only verifier: point-mass drafts)"
    floor = caps.min_temperature
    low = [t for t in case.temperatures if not in_temperature_domain(t, floor)]
    return f"temperatures {low} below the kernel's domain (min_temperature {floor:g})" if low else ""


class _CaseFailed(Exception):
    pass


def findings_from(violations: list[Violation], evidence: dict | None = None) -> list[Finding]:
    return [
        Finding(cls=v.cls, first_field=v.first_field, message=v.message, evidence=dict(evidence or {}))
        for v in violations
    ]


def kernel_raised_finding(exc: KernelRaised) -> Finding:
    cls = "device_fault" if isinstance(exc, DeviceFault) else "kernel_raised"
    return Finding(cls=cls, first_field=exc.what, message=str(exc), evidence={"traceback": exc.trace})


FAULT_CLASSES = ("crash", "hang")
HUNG_SHAPES_KEY = "hung_shapes"
CUT_AFTER_HANG = "cut: a case of its shape hung in"


def _hung_elsewhere(outcome: CaseCheck, ctx: RunContext, name: str) -> bool:
    """Whether ``outcome`` is a hang and an earlier property of the run already found (and shrank) one:
    then this property stops with its finding instead of shrinking it, each try of which may cost a
    hang's time limit."""
    hangs = any(f.cls == "hang" for f in outcome.findings)
    return hangs and any(where != name for where in ctx.extra.get(HUNG_SHAPES_KEY, {}).values())


def hang_shape(case: Case) -> tuple:
    """The compile-relevant shape of ``case``: power-of-two vocabulary rung, multiple of 16 or not,
    dtype, method, draft logits or point drafts, logprobs, few (<= FEW_REQUESTS) or many requests."""
    v = case.vocab_size
    return (1 << max(0, v - 1).bit_length(), v % 16 == 0, case.dtype, case.method, case.has_draft_logits,
            case.want_logprobs, len(case.draft_lens) > FEW_REQUESTS)


def fault_finding(exc: KernelFault) -> Finding:
    return Finding(cls=exc.kind, first_field=exc.what, message=str(exc), evidence=dict(exc.evidence))


def repro_command(ctx: RunContext, name: str) -> str:
    """The one-line ``check`` command that re-finds this failure (same seed, profile and examples)."""
    from harness.profiles import PROFILES

    spec = ctx.kernel_spec or "<kernel spec>"
    command = (
        f"python -m harness check --kernel {spec} --profile {ctx.profile.name} "
        f"--seed {ctx.seed} --only {name} --device {ctx.device.type}"
    )
    registered = PROFILES.get(ctx.profile.name)
    if registered != ctx.profile:
        command += f" --max-examples {ctx.profile.max_examples}"
        if registered and registered.call_time_limit_s != ctx.profile.call_time_limit_s:
            command += f" --time-limit {ctx.profile.call_time_limit_s:g}"
    return command


def foreground_repro(ctx: RunContext, name: str, case: dict) -> str:
    """One command that runs property ``name`` on exactly ``case`` in the foreground: no worker, so a
    crash kills it where a debugger (``gdb --args``, ``compute-sanitizer``) can see it."""
    spec = ctx.kernel_spec or "<kernel spec>"
    return (
        f"python -m harness replay --case {shlex.quote(json.dumps(case, separators=(',', ':')))} "
        f"--only {name} --kernel {spec} --profile {ctx.profile.name} --seed {ctx.seed} "
        f"--device {ctx.device.type} --in-process"
    )


class CaseProperty:
    """Base class: subclasses set ``name``, ``layer``, ``summary`` and implement ``check``."""

    name: str = ""
    layer: int = 1
    summary: str = ""
    # Whether cases carry drawn chunk budgets under a profile with a palette (nightly draws them
    # everywhere): only where the claim is about chunked calls (``chunk_invariance``: chunked ==
    # unchunked bit for bit, which every other property judges; ``structural``: guards and contract
    # of chunked calls). Elsewhere a chunked call only added compiled variants (chunk slices at
    # unaligned rows, per-chunk batch sizes) to a run.
    chunk_budgets: bool = False
    # A property that judges the kernel only against itself and never draws a case or a call from
    # its outputs can be planned (harness/compiles/planning.py) with one constant answer per request
    # instead of the float64 oracle's: the same cases and calls as a passing run, without the oracle.
    plans_with_constant_answers: bool = False

    def not_claimed_reason(self, kernel: object) -> str | None:
        """Why the kernel does not claim this property (``None``: it does)."""
        return None

    def claimed(self, kernel: object) -> bool:
        return self.not_claimed_reason(kernel) is None

    def space(self, kernel: object, ctx: RunContext) -> CaseSpace:
        """The kernel's space under the profile; when the profile has a palette, with the run's
        shapes (harness/generation/shape_palette.py: one palette for every property of a run, from its seed)
        and chunk budgets only where ``chunk_budgets`` says."""
        space = CaseSpace.for_kernel(ctx.profile, kernel)
        if not ctx.profile.shape_palette:
            return space
        space = replace(space, chunking=space.chunking and self.chunk_budgets)
        return replace(space, shapes=palette(space, ctx.child_seed("shape palette")))

    def strategy(self, kernel: object, ctx: RunContext) -> st.SearchStrategy[Case]:
        return cases(self.space(kernel, ctx))

    def check(self, kernel: object, case: Case, ctx: RunContext) -> CaseCheck:
        raise NotImplementedError

    def anchor_cases(self, kernel: object, ctx: RunContext) -> list[Case]:
        """Cases judged before the Hypothesis search, every run: the ordinary workloads a small
        example budget might not reach (subclasses override; default none)."""
        return []

    def check_guarded(self, kernel: object, case: Case, ctx: RunContext) -> CaseCheck:
        """``check`` with kernel exceptions turned into findings; every finding carries the case.

        A case outside the kernel's declared domain (a positive temperature below
        ``Capabilities.min_temperature``, e.g. a fixed anchor or corpus case) is skipped, never run."""
        outside = outside_domain(case, kernel)
        if outside:
            return CaseCheck(skipped=outside)
        hung = ctx.extra.setdefault(HUNG_SHAPES_KEY, {})
        where = hung.get(hang_shape(case))
        if where is not None and where != self.name:
            return CaseCheck(skipped=f"{CUT_AFTER_HANG} {where}")
        try:
            outcome = self.check(kernel, case, ctx)
        except KernelRaised as exc:
            outcome = CaseCheck(findings=[kernel_raised_finding(exc)])
            if isinstance(exc, DeviceFault):
                ctx.extra["device_fault"] = str(exc)
        except KernelFault as exc:
            outcome = CaseCheck(findings=[fault_finding(exc)])
            if exc.kind == "hang":
                hung.setdefault(hang_shape(case), self.name)
        for f in outcome.findings:
            if not f.case:
                f.case = case.to_dict()
            if not f.repro and f.cls in FAULT_CLASSES:
                f.repro = foreground_repro(ctx, self.name, f.case)
            if not f.repro:
                f.repro = repro_command(ctx, self.name)
        return outcome

    def run(self, kernel: object, ctx: RunContext) -> PropertyResult:
        started = time.perf_counter()
        result = PropertyResult(name=self.name, layer=self.layer, verdict=PASS)
        reason = self.not_claimed_reason(kernel)
        if reason is not None:
            result.verdict, result.note = NOT_CLAIMED, reason
            return result
        state = {"best": None, "first_fail": None, "calls_after": 0, "skipped": 0, "cut": ""}
        profile = ctx.profile
        coverage = ctx.extra.setdefault("coverage", {})

        def budget_spent() -> bool:
            if ctx.extra.get("device_fault") or deadline_passed(ctx):
                return True
            if state["first_fail"] is None:
                return False
            return (
                state["calls_after"] >= profile.shrink_calls
                or time.perf_counter() - state["first_fail"] >= profile.shrink_seconds
            )

        def one_case(case: Case) -> None:
            if state["best"] is not None:
                state["calls_after"] += 1
                if budget_spent():
                    if case.to_dict() == state["best"][0].to_dict():
                        raise _CaseFailed()
                    return
            elif deadline_passed(ctx):  # check --budget: this property's share is spent
                raise BudgetSpent()
            outcome = self.check_guarded(kernel, case, ctx)
            ctx.progress.advance(result.cases + state["skipped"] + 1)
            if outcome.skipped:
                state["skipped"] += 1
                if outcome.skipped.startswith(CUT_AFTER_HANG):
                    state["cut"] = outcome.skipped.removeprefix(CUT_AFTER_HANG).strip()
                return
            result.cases += 1
            result.ties += outcome.ties
            if state["best"] is None:
                for key, values in coverage_of(case).items():
                    coverage.setdefault(key, []).extend(values)
            if outcome.findings:
                state["best"] = (case, outcome.findings)
                if state["first_fail"] is None:
                    state["first_fail"] = time.perf_counter()
                    if _hung_elsewhere(outcome, ctx, self.name):  # no shrinking at a hang's price
                        state["first_fail"] -= profile.shrink_seconds
                raise _CaseFailed()

        phases = [Phase.explicit, Phase.generate] + ([] if ctx.fail_fast else [Phase.shrink])
        runner = settings(
            max_examples=profile.max_examples,
            derandomize=False,
            database=None,
            deadline=None,
            phases=phases,
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
            report_multiple_bugs=False,
            print_blob=False,
        )(seed(ctx.child_seed("property", self.name))(given(self.strategy(kernel, ctx))(one_case)))
        anchors = self.anchor_cases(kernel, ctx)
        planned = len(anchors) + profile.max_examples
        ctx.progress.start(self.name, planned)
        cut = False
        try:
            for anchor in anchors:
                one_case(anchor)  # a failing anchor ends the property (reported unshrunk)
            runner()
        except _CaseFailed:
            pass
        except BudgetSpent:
            cut = True
        except Flaky as exc:
            if state["best"] is None:
                result.verdict, result.note = ERROR, f"Hypothesis reported flakiness: {exc}"
        except Exception as exc:  # noqa: BLE001 -- a harness bug must not stop the run
            result.verdict, result.note = ERROR, f"harness error: {type(exc).__name__}: {exc}"
        finally:
            ctx.progress.finish()
        if state["best"] is not None:
            result.verdict = FAIL
            result.failures = state["best"][1]
        elif cut:  # stopped before its examples were drawn: what it did not reach was not tested
            result.verdict = SKIPPED
            result.note = budget_note(result.cases + state["skipped"], planned, "cases",
                                      time.perf_counter() - started)
        elif result.cases == 0 and result.verdict == PASS:  # nothing was judged: never a "pass"
            result.verdict = SKIPPED
            result.note = f"no applicable case among {state['skipped']} drawn"
        if state["cut"]:
            result.note = (result.note + "; " if result.note else "") + (
                f"cases of a shape that hung in {state['cut']} were cut, not run")
        result.seconds = time.perf_counter() - started
        return result
