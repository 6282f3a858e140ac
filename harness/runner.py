"""Run properties against a kernel, one after another, so that one bad case cannot poison the run.

- ``run_properties`` walks the selected properties in registry order (cheapest layers first). A
  property the kernel does not claim is reported ``not claimed`` without being run (whatever its
  ``run`` does: a kernel is never called with a method it does not declare). A property that raises
  is recorded as ``error`` and the run goes on; a kernel exception inside a case
  is already a failure of that case (harness/properties/case_property.py).
- Device faults: when a kernel corrupts the CUDA context (``ctx.extra["device_fault"]`` is set,
  harness/execution/kernel_calls.py), nothing more can run in this process. The remaining properties are run
  in a fresh ``python -m harness check`` subprocess with the same kernel, profile, seed and device,
  and its results are folded in. If that is impossible (``allow_subprocess=False``, or the child
  fails), the remaining properties are marked ``error`` with the reason.
- Interruption: ``python -m harness check`` turns SIGTERM (what ``timeout`` and CI runners send) into
  ``Interrupted``. The property it stops is recorded as ``error`` ("interrupted"), the remaining ones
  are not run, and the caller still prints the summary and writes the report, so the failures found
  before the limit (already shrunk, with their cases) are kept.
- Supervised kernels (harness/execution/supervisor.py): a ``KernelFault`` that escapes a property that is not
  case by case (the statistical layer calls the kernel on batches of its own) fails that property
  with a ``crash`` / ``hang`` finding on the exact batch of the call (``fault_result``); its repro
  runs that batch through ``structural`` in the foreground. The next property gets a fresh worker.
- Budget (``check --budget``, harness/timing/budget.py): with a ``Budget``, each claimed property gets a
  deadline (an equal share of what is left; unused time carries over) in ``ctx.extra``; a property
  cut at its deadline, or not started because the budget was spent, is ``skipped`` with a note
  starting ``skipped for budget``, never ``pass``.
- ``run_case`` is the single-case entry point that fuzz and corpus replay call: it runs the per-case
  properties (layers 1, 2, 3, 5) on one given ``Case``.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.contract import VerifyBatch
from harness.execution.kernel_calls import KernelFault
from harness.generation.cases import Case, case_from_batch
from harness.properties import IMPORT_ERRORS, REGISTRY
from harness.properties.base import (
    ERROR,
    FAIL,
    NOT_CLAIMED,
    PASS,
    SKIPPED,
    Property,
    PropertyResult,
    RunContext,
    unclaimed_result,
)
from harness.properties.case_property import CaseCheck, CaseProperty, fault_finding, foreground_repro
from harness.reporting.report import statistical_reach
from harness.timing.budget import DEADLINE_KEY, SKIPPED_FOR_BUDGET, Budget

Progress = Callable[[str], None]


class UnknownProperty(ValueError):
    pass


class Interrupted(BaseException):
    """Raised in the main thread by the SIGTERM handler of ``interrupt_on_sigterm`` (a BaseException,
    so the ``except Exception`` around kernel calls and properties cannot swallow it)."""


@contextlib.contextmanager
def interrupt_on_sigterm():
    """Within the block, SIGTERM raises ``Interrupted`` in the main thread; the previous handler is
    restored afterwards. Outside the main thread (where handlers cannot be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise Interrupted(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def select_properties(only: Iterable[str] | None = None) -> list[Property]:
    """Registered properties in order, restricted to ``only`` (exact names) when given."""
    if not only:
        return list(REGISTRY.values())
    names = list(only)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise UnknownProperty(f"unknown properties {unknown}; known: {sorted(REGISTRY)}")
    return [REGISTRY[n] for n in REGISTRY if n in names]


def import_error_results(only: Iterable[str] | None = None) -> list[PropertyResult]:
    """Property modules that failed to import, as ``error`` results (only on a full run)."""
    if only:
        return []
    return [
        PropertyResult(name=f"import:{mod}", layer=0, verdict=ERROR, note=err.splitlines()[0])
        for mod, err in IMPORT_ERRORS.items()
        if "is missing" not in err
    ]


def _result_line(res: PropertyResult) -> str:
    extra = f" ties={res.ties}" if res.ties else ""
    why = (
        f" -- {res.failures[0].cls}: {res.failures[0].message}"
        if res.failures
        else (f" -- {res.note}" if res.note and res.verdict != PASS else "")
    )
    return f"{res.verdict.upper():11s} {res.name} ({res.cases} cases, {res.seconds:.1f}s{extra}){why}"


def run_properties(
    kernel: object,
    ctx: RunContext,
    properties: list[Property],
    progress: Progress = lambda s: None,
    allow_subprocess: bool = True,
    budget: Budget | None = None,
) -> list[PropertyResult]:
    results: list[PropertyResult] = []
    started = time.perf_counter()
    claimed = [unclaimed_result(p, kernel) is None for p in properties] if budget else []
    try:
        for i, prop in enumerate(properties):
            if ctx.extra.get("device_fault"):
                remaining = properties[i:]
                progress(
                    f"device fault ({ctx.extra['device_fault']}); "
                    f"continuing {len(remaining)} properties in a fresh process"
                )
                results.extend(_continue_elsewhere(ctx, remaining, allow_subprocess))
                break
            progress(f"[{i + 1}/{len(properties)}] {prop.name} (layer {prop.layer}) ...")
            started = time.perf_counter()
            if budget and claimed[i]:
                ctx.extra[DEADLINE_KEY] = budget.deadline(sum(claimed[i:]))
            try:
                if budget and claimed[i] and ctx.extra[DEADLINE_KEY] is None:
                    res = PropertyResult(prop.name, prop.layer, SKIPPED, note=budget.not_started_note())
                else:
                    res = unclaimed_result(prop, kernel) or prop.run(kernel, ctx)
            except KernelFault as exc:
                res = fault_result(prop, exc, ctx)
            except Exception as exc:  # noqa: BLE001 -- a broken property must not end the run
                res = PropertyResult(prop.name, prop.layer, ERROR, note=f"{type(exc).__name__}: {exc}")
            finally:
                ctx.extra.pop(DEADLINE_KEY, None)
            res.seconds = res.seconds or (time.perf_counter() - started)
            results.append(res)
            progress("    " + _result_line(res))
            if ctx.fail_fast and res.verdict == FAIL:
                break
    except Interrupted as exc:  # anywhere in the loop: the first property without a result is marked
        done = {r.name for r in results}
        pending = [p for p in properties if p.name not in done]
        if pending:
            res = PropertyResult(pending[0].name, pending[0].layer, ERROR,
                                 note=f"interrupted ({exc}); not run: {[p.name for p in pending[1:]]}")
            res.seconds = time.perf_counter() - started
            results.append(res)
            progress("    " + _result_line(res))
    return results


def fault_result(prop: Property, exc: KernelFault, ctx: RunContext) -> PropertyResult:
    """A whole property failed by a crash or hang of one of its calls, with that call's batch as case."""
    finding = fault_finding(exc)
    finding.message += f" (during {prop.name})"
    if isinstance(exc.batch, VerifyBatch):
        finding.case = case_from_batch(exc.batch).to_dict()
        finding.repro = foreground_repro(ctx, "structural", finding.case)
    return PropertyResult(prop.name, prop.layer, FAIL, cases=1, failures=[finding])


def _continue_elsewhere(
    ctx: RunContext, remaining: list[Property], allow_subprocess: bool
) -> list[PropertyResult]:
    def marked(reason: str) -> list[PropertyResult]:
        return [PropertyResult(p.name, p.layer, ERROR, note=reason) for p in remaining]

    if not allow_subprocess or not ctx.kernel_spec:
        return marked("not run: the device was unusable after an earlier kernel fault")
    with tempfile.TemporaryDirectory(prefix="specfuzz-continue-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "harness",
            "check",
            "--kernel",
            ctx.kernel_spec,
            "--profile",
            ctx.profile.name,
            "--seed",
            str(ctx.seed),
            "--device",
            ctx.device.type,
            "--report",
            tmp,
            "--quiet",
            "--max-examples",
            str(ctx.profile.max_examples),
            "--only",
            *[p.name for p in remaining],
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        report = Path(tmp) / "report.json"
        if not report.exists():
            return marked(f"not run: the fresh process failed (exit {proc.returncode}): {proc.stderr[-300:]}")
        props = json.loads(report.read_text())["properties"]
    results = [PropertyResult.from_json(p) for p in props]
    for r in results:
        r.note = (r.note + " " if r.note else "") + "(run in a fresh process after a device fault)"
    return results


def run_case(
    kernel: object, case: Case, ctx: RunContext, names: Iterable[str] | None = None
) -> list[tuple[str, CaseCheck]]:
    """Run the per-case properties (all, or ``names``) that the kernel claims on one case."""
    outcomes = []
    for prop in select_properties(names):
        if not isinstance(prop, CaseProperty) or not prop.claimed(kernel):
            continue
        outcomes.append((prop.name, prop.check_guarded(kernel, case, ctx)))
    return outcomes


def overall_exit_code(results: list[PropertyResult]) -> int:
    """0 when every claimed property holds, 1 when any fails, 2 when any errored (and none failed)."""
    verdicts = {r.verdict for r in results}
    if FAIL in verdicts:
        return 1
    if ERROR in verdicts:
        return 2
    return 0


def strict_exit_code(results: list[PropertyResult]) -> int:
    """``overall_exit_code``, except that a claimed property that was skipped (not run within the
    profile's budget, or no applicable case) is a failure (1): ``check --strict``."""
    code = overall_exit_code(results)
    return 1 if code == 0 and any(r.verdict == SKIPPED for r in results) else code


def _why(note: str, width: int = 90) -> str:
    line = " ".join(note.split()).removeprefix("not run: ")
    return line if len(line) <= width else line[: width - 3] + "..."


def _budget_part(note: str) -> str:
    """``"12 of 72 cases in 40.0s"`` or ``"not started"`` from a skipped-for-budget note."""
    return note.removeprefix(SKIPPED_FOR_BUDGET + ": ").split(" (")[0].split(", ")[0]


def verdict_line(results: list[PropertyResult], code: int, strict: bool, seconds: float, seed: int) -> str:
    """The last line of ``check``: the verdict, how many properties ran, and which were skipped (and
    why) or not claimed, so that ``PASS`` never hides a property that was not run. When no property
    ran at all, the word is ``NOTHING RAN`` instead of ``PASS`` (the exit code is the same: 0, or 1
    under ``--strict`` when a claimed property was skipped)."""
    ran = [r for r in results if r.verdict in (PASS, FAIL, ERROR)]
    verdict = ["PASS", "FAIL", "ERROR"][code] if ran else ("NOTHING RAN" if code == 0 else "FAIL")
    failed = sum(r.verdict == FAIL for r in ran)
    errors = sum(r.verdict == ERROR for r in ran)
    skipped = [r for r in results if r.verdict == SKIPPED]
    for_budget = [r for r in skipped if r.note.startswith(SKIPPED_FOR_BUDGET)]
    skipped = [r for r in skipped if r not in for_budget]
    unclaimed = [r.name for r in results if r.verdict == NOT_CLAIMED]
    parts = [f"{len(ran)} of {len(results)} properties ran ({len(ran) - failed - errors} held, "
             f"{failed} failed, {errors} errors)"]
    strictly = " -- a failure under --strict" if strict else ""
    if for_budget:  # cut or not started: the run did not reach them, so they are not "held"
        parts.append(f"{len(for_budget)} {SKIPPED_FOR_BUDGET}{strictly}: "
                     + ", ".join(f"{r.name} ({_budget_part(r.note)})" for r in for_budget))
    if skipped:
        why = "; ".join(f"{r.name} ({_why(r.note)})" for r in skipped)
        parts.append(f"{len(skipped)} claimed but skipped{strictly}: {why}")
    if unclaimed:
        parts.append(f"{len(unclaimed)} not claimed: {', '.join(unclaimed)}")
    reach = statistical_reach(results)
    if reach:
        parts.append(reach)
    return f"{verdict}: {'; '.join(parts)} -- in {seconds:.1f}s (seed {seed})"


__all__ = ["run_properties", "run_case", "select_properties", "overall_exit_code", "strict_exit_code",
           "verdict_line", "interrupt_on_sigterm",
           "Interrupted", "PASS", "NOT_CLAIMED"]
