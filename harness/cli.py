"""``python -m harness ...``: the command line.

``check --kernel SPEC [--profile ci|dev|gpu|nightly] [--device cpu|cuda] [--seed N] [--report DIR]
[--only NAME...] [--fail-fast] [--strict] [--budget DURATION] [--time-limit S] [--in-process]`` runs
every registered property the kernel claims and exits 0 when all claimed properties hold, 1 when any
fails (with ``--strict``: or a claimed one was skipped; a kernel that crashes, exits or hangs its
supervised worker fails: harness/execution/supervisor.py), 2 on a usage or harness error. Its last line says
how many properties ran, which were skipped and why, and which the kernel does not claim.
``--budget`` spends a wall-time budget across the properties (harness/timing/budget.py: equal shares of
what is left); what it does not reach is ``skipped for budget``, never passed. On a terminal a status
line inside each property shows cases done, elapsed time and an estimate (harness/timing/progress.py).
Other subcommands (fuzz, merge,
replay, mutate, calibrate, record, diff) come from modules that define ``add_cli(subparsers)``; each
sets ``func`` on its parser to a callable taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib
import os
import shlex
import sys
import time
import warnings

import kernels._device  # noqa: F401  (chooses compiled Triton or the interpreter before triton loads)

USAGE_ERROR = 2
SUBCOMMAND_MODULES = (
    "harness.campaigns.fuzz",
    "harness.campaigns.merge",
    "harness.campaigns.corpus",
    "harness.mutation.mutate",
    "harness.campaigns.calibrate",
    "harness.golden.commands",
)
CI_DEFAULT_SEED = 0


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def add_check_cli(subparsers) -> None:
    from harness.execution.supervisor import add_supervision_args
    from harness.plugins import DEFAULT_KERNEL_SPEC
    from harness.profiles import PROFILES

    p = subparsers.add_parser("check", help="run every claimed property against a kernel once")
    p.add_argument(
        "--kernel", default=DEFAULT_KERNEL_SPEC, help="package.module:attr (object or zero-arg factory)"
    )
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help="size of the run (default: gpu with CUDA, else ci; SPECFUZZ_PROFILE overrides)",
    )
    p.add_argument(
        "--device", choices=("cpu", "cuda"), default=None, help="device under test (default: cuda if present)"
    )
    p.add_argument(
        "--seed", type=int, default=None, help="root seed (default: 0 for ci, else drawn and printed)"
    )
    p.add_argument("--report", metavar="DIR", default=None, help="write DIR/report.json")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None, help="run only these properties")
    p.add_argument(
        "--fail-fast", action="store_true", help="stop at the first failing property, no shrinking"
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a claimed property that was skipped (over the profile's budget, no applicable case) "
        "fails the run",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines (summary only)")
    p.add_argument(
        "--budget",
        metavar="DURATION",
        default=None,
        help="wall time for all properties (90s, 3m, 1h): equal shares of what is left; what it does "
        "not reach is reported 'skipped for budget', never passed",
    )
    p.add_argument(
        "--prewarm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compile every Triton specialisation the run will launch in parallel processes while "
        "the properties run (harness/compiles/prewarm.py); default: on for our kernels on a GPU "
        "unless SPECFUZZ_PREWARM=0 (what pytest -n auto's workers get)",
    )
    add_supervision_args(p)
    p.add_argument(
        "--max-examples",
        type=int,
        default=None,
        metavar="N",
        help="override the profile's examples per property",
    )
    p.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    import torch

    from harness.campaigns.fuzz import UsageError, parse_duration
    from harness.contract import KernelNotReady, capabilities_of, domain_of, prepare_kernel
    from harness.execution.supervisor import close, profile_with_limits, supervise
    from harness.plugins import PluginError, load_kernel
    from harness.profiles import PROFILES, active_profile_name
    from harness.properties.base import ERROR, PropertyResult, RunContext, unclaimed_result
    from harness.properties.statistical import CHECK_SECONDS, SPENDERS_KEY, STATISTICS_END_KEY, TIME_SPENDERS
    from harness.reporting.report import build_report, family_wise_alpha, summary_table, write_report
    from harness.runner import (
        Interrupted,
        UnknownProperty,
        import_error_results,
        interrupt_on_sigterm,
        overall_exit_code,
        run_properties,
        select_properties,
        strict_exit_code,
        verdict_line,
    )
    from harness.timing.budget import Budget
    from harness.timing.progress import Progress

    say = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    try:
        budget_s = parse_duration(args.budget) if args.budget is not None else None
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    # Degenerate rows make the interpreter and the oracle compute inf/NaN on purpose:
    # keep the console readable.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"(triton|reference|numpy)\.")
    profile = PROFILES[args.profile or active_profile_name()]
    if args.max_examples is not None:
        if args.max_examples < 1:
            print("error: --max-examples must be >= 1", file=sys.stderr)
            return USAGE_ERROR
        profile = dataclasses.replace(profile, max_examples=args.max_examples)
    try:
        profile = profile_with_limits(profile, args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    device_name = args.device or _default_device()
    if device_name == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device is available", file=sys.stderr)
        return USAGE_ERROR
    device = torch.device(device_name)
    if args.seed is None:
        seed = CI_DEFAULT_SEED if profile.name == "ci" else int.from_bytes(os.urandom(4), "little")
    else:
        seed = args.seed
    try:
        kernel = load_kernel(args.kernel)
        properties = select_properties(args.only)
    except (PluginError, UnknownProperty) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    if device.type not in capabilities_of(kernel).devices:
        print(f"error: kernel {kernel.name!r} does not run on {device.type}", file=sys.stderr)
        return USAGE_ERROR
    try:
        prepare_kernel(kernel)
    except KernelNotReady as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR

    command = (
        f"python -m harness check --kernel {args.kernel} --profile {profile.name} "
        f"--device {device.type} --seed {seed}"
    )
    if args.max_examples is not None:
        command += f" --max-examples {args.max_examples}"
    if args.time_limit is not None:
        command += f" --time-limit {args.time_limit:g}"
    if args.in_process:
        command += " --in-process"
    if args.only:
        command += " --only " + " ".join(shlex.quote(n) for n in args.only)
    if args.strict:
        command += " --strict"
    if args.budget is not None:
        command += f" --budget {shlex.quote(args.budget)}"
    say(
        f"specfuzz check: kernel={args.kernel} ({kernel.name}) profile={profile.name} "
        f"device={device} seed={seed}"
    )
    say(f"reproduce with: {command}")
    ctx = RunContext(
        profile=profile, device=device, seed=seed, kernel_spec=args.kernel, fail_fast=args.fail_fast
    )
    ctx.extra["domain"] = domain_of(kernel)
    if not args.quiet:
        ctx.extra["progress"] = Progress()  # silent unless stderr is a terminal and CI is unset
    if budget_s is not None:
        ctx.extra["budget_s"] = budget_s
    say("domain: " + " ".join(f"{k}={v}" for k, v in ctx.extra["domain"].items()))
    started, t0 = _dt.datetime.now(_dt.timezone.utc), time.perf_counter()
    if budget_s is None and profile.name in CHECK_SECONDS:  # time-sized statistics fill the rest
        ctx.extra[STATISTICS_END_KEY] = t0 + CHECK_SECONDS[profile.name]
        ctx.extra[SPENDERS_KEY] = {p.name for p in properties if p.name in TIME_SPENDERS
                                   and unclaimed_result(p, kernel) is None}
    from harness.compiles.prewarm import OUR_KERNELS

    kernel = supervise(kernel, args.kernel, profile, args.in_process)
    warming = None
    # On the CPU nothing compiles: --prewarm runs only the plumbing (tests/harness/test_worker_preload.py)
    default_on = os.environ.get("SPECFUZZ_PREWARM", "1") != "0" and args.kernel == OUR_KERNELS
    if args.prewarm or (args.prewarm is None and device.type == "cuda" and default_on):
        from harness.compiles import prewarm as warm_up

        supervisor = getattr(kernel, "supervisor", None)  # its worker loads the binaries between calls
        ready = (lambda records: supervisor.preload(warm_up.LOAD_BINARY, records)) if supervisor else None
        warming = warm_up.prewarm(profile.name, seed, device=device.type, kernel_spec=args.kernel, say=say,
                                  max_examples=args.max_examples, names=args.only, background=True,
                                  ready=ready)
    results = []
    with interrupt_on_sigterm():  # a time limit still gets the summary and the report of what ran
        try:
            results = import_error_results(args.only)
            budget = Budget(budget_s) if budget_s is not None else None
            results += run_properties(kernel, ctx, properties, progress=say, budget=budget)
        except Interrupted:  # before run_properties took over (it records its own interruption)
            results.append(PropertyResult("check", 0, ERROR, note="interrupted before any property ran"))
        finally:
            close(kernel)
            if warming is not None:
                # a run that passed everything launched every key it planned (harness/compiles/prewarm.py)
                passed = bool(results) and all(r.verdict in ("pass", "not claimed") for r in results)
                warming.stop(record=passed)
    duration = time.perf_counter() - t0

    print(summary_table(results))
    alpha = family_wise_alpha(results)
    print(
        f"family-wise false-alarm bound (Holm over {sum(len(r.statistics) for r in results)} "
        f"statistical assertions): {alpha:.3g}"
    )
    code = strict_exit_code(results) if args.strict else overall_exit_code(results)
    print(verdict_line(results, code, args.strict, duration, seed))
    if args.report:
        path = write_report(build_report(results, ctx, command, started, duration), args.report)
        print(f"report: {path}")
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description="specfuzz: fuzz and verify speculative-decoding verification kernels",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_check_cli(sub)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                print(f"warning: {name} not available: {exc}", file=sys.stderr)
            continue
        except Exception as exc:  # noqa: BLE001 -- a broken plug-in must not disable `check`
            print(f"warning: {name} failed to import: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        add = getattr(module, "add_cli", None)
        if callable(add):
            add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return USAGE_ERROR
