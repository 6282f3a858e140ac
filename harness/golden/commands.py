"""``python -m harness record`` and ``python -m harness diff``: the pre-merge differential.

``record --kernel SPEC --out FILE [--profile P] [--seed N] [--device D] [--rounds N] [--no-crafted]``
writes a golden file (harness/golden/file_format.py) of the kernel's answers on the case set of
harness/golden/case_set.py (``--rounds``: repeats of its grid instead of the profile's). The seed
defaults to 0 on the ci profile and is drawn and printed otherwise.

``diff --against FILE [--kernel SPEC] [--json OUT] [--fail-fast]`` replays the file on the kernel as it
is now (harness/golden/diff.py); ``diff --base SPEC [--kernel SPEC] [--profile P] [--seed N]``
records ``--base`` in memory and diffs ``--kernel`` against it in one process, with no file;
``diff --against FILE --mutant NAME ...`` (or ``--mutant all``) diffs the file against each catalogue
mutant of ``kernels/`` in a child process (harness/golden/mutant_sweep.py) and prints a table. Exit codes
are the diff's: 0 identical, 1 a new answer wrong, 2 usage error or inputs changed, 3 outputs
changed and every new answer legal (for ``--mutant``: 0 when every mutant was run, 2 otherwise).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import warnings
from pathlib import Path

USAGE_ERROR = 2


def _say(args):
    return (lambda s: None) if getattr(args, "quiet", False) else (lambda s: print(s, flush=True))


def _setup(args) -> tuple:
    """(profile, device, seed) from the common options; raises ValueError on a bad combination."""
    import torch

    from harness.profiles import PROFILES, active_profile_name

    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"(triton|reference|numpy)\.")
    profile = PROFILES[getattr(args, "profile", None) or active_profile_name()]
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda but no CUDA device is available")
    seed = args.seed
    if seed is None:
        seed = 0 if profile.name == "ci" else int.from_bytes(os.urandom(4), "little")
    return profile, torch.device(device), seed


def _record_golden(spec: str, kernel, profile, device, seed: int, args, say):
    from harness.contract import has_random_draws
    from harness.generation.strategies import CaseSpace
    from harness.golden.case_set import golden_cases
    from harness.golden.file_format import record
    from harness.reporting.report import device_description, git_commit, versions

    space = CaseSpace.for_kernel(profile, kernel)
    crafted = not args.no_crafted
    cases = golden_cases(kernel, profile, seed, crafted=crafted, num_rounds=args.rounds)
    command = f"python -m harness record --kernel {spec} --profile {profile.name} --seed {seed}" + (
        ("" if crafted else " --no-crafted") + ("" if args.rounds is None else f" --rounds {args.rounds}")
    )
    header = {
        "command": command,
        "kernel": spec,
        "kernel_name": kernel.name,
        "profile": profile.name,
        "seed": seed,
        "device": device_description(device),
        "versions": versions(),
        "commit": git_commit(),
        "space": {"methods": list(space.methods), "dtypes": list(space.dtypes)},
        "random_draws": has_random_draws(kernel),
    }
    say(
        f"recording {kernel.name} ({spec}): {len(cases)} cases, {sum(c.num_reqs for c in cases)} requests, "
        f"profile {profile.name}, seed {seed}, device {device}"
    )
    return record(kernel, cases, device, header, progress=say)


def run_record(args) -> int:
    from harness.golden.case_set import coverage
    from harness.golden.file_format import save
    from harness.plugins import PluginError, load_kernel

    say = _say(args)
    try:
        profile, device, seed = _setup(args)
        kernel = load_kernel(args.kernel)
    except (ValueError, PluginError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    golden = _record_golden(args.kernel, kernel, profile, device, seed, args, say)
    size = save(golden, args.out)
    errors = sum(c.answer.error is not None for c in golden.cases)
    print(
        f"wrote {args.out}: {len(golden.cases)} cases, {golden.num_requests} requests, {size} bytes, "
        f"{golden.header['seconds']:.1f} s" + (f", {errors} cases where the kernel raised" if errors else "")
    )
    say("coverage: " + json.dumps(coverage([c.case for c in golden.cases])))
    return 0


def run_diff(args) -> int:
    from harness.golden.diff import diff_golden, format_summary
    from harness.golden.file_format import load
    from harness.plugins import PluginError, load_kernel
    from harness.reporting.report import device_description

    say = _say(args)
    if bool(args.against) == bool(args.base):
        print("error: give exactly one of --against FILE or --base SPEC", file=sys.stderr)
        return USAGE_ERROR
    if args.mutant:
        return run_mutants(args)
    try:
        profile, device, seed = _setup(args)
        kernel = load_kernel(args.kernel)
        if args.against:
            golden = load(args.against)
            against = args.against
        else:
            golden = _record_golden(
                args.base, load_kernel(args.base), profile, device, seed, args, lambda s: None
            )
            against = f"{args.base} (recorded in this process)"
    except (ValueError, PluginError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    say(
        f"diff: {kernel.name} ({args.kernel}) on {device} against {against}: recorded from "
        f"{golden.header['kernel']} on {golden.header['device']} (profile {golden.header['profile']}, seed "
        f"{golden.header['seed']}, commit {golden.header.get('commit') or '?'}), {len(golden.cases)} cases"
    )
    header = {
        "command": f"python -m harness diff --kernel {args.kernel} "
        + (
            f"--against {shlex.quote(args.against)}"
            if args.against
            else f"--base {args.base} --profile {profile.name} --seed {seed}"
        ),
        "kernel": args.kernel,
        "device": device_description(device),
        "against": against,
        "recorded": {
            k: golden.header.get(k) for k in ("kernel", "device", "profile", "seed", "commit", "versions")
        },
    }
    result = diff_golden(golden, kernel, device, header, progress=say, fail_fast=args.fail_fast)
    print(format_summary(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1, default=str))
    return result.exit_code


def run_mutants(args) -> int:
    from harness.golden.mutant_sweep import diff_mutant, mutant_table
    from harness.mutation.catalogue import by_name

    if not args.against:
        print("error: --mutant needs --against FILE", file=sys.stderr)
        return USAGE_ERROR
    try:
        mutants = by_name([] if args.mutant == ["all"] else args.mutant)
    except KeyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    rows = []
    for m in mutants:
        row = diff_mutant(m, Path(args.against), args.kernel, args.timeout, args.device, args.fail_fast)
        print(
            f"{m.name}: {row.outcome} (exit {row.exit_code}) in {row.seconds:.1f} s {row.first}", flush=True
        )
        rows.append(row)
    print(mutant_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([vars(r) | {"outcome": r.outcome} for r in rows], indent=1))
    ran = ("reported", "identical")
    return 0 if all(r.outcome in ran or r.outcome.startswith("crashed") for r in rows) else USAGE_ERROR


def add_cli(subparsers) -> None:
    from harness.plugins import DEFAULT_KERNEL_SPEC
    from harness.profiles import PROFILES

    def common(p):
        p.add_argument("--kernel", default=DEFAULT_KERNEL_SPEC, help="package.module:attr")
        p.add_argument(
            "--profile",
            choices=sorted(PROFILES),
            default=None,
            help="size of the case set (default: gpu with CUDA, else ci)",
        )
        p.add_argument("--seed", type=int, default=None, help="case-set seed (default: 0 on ci, else drawn)")
        p.add_argument("--device", choices=("cpu", "cuda"), default=None)
        p.add_argument("--no-crafted", action="store_true", help="leave out the crafted cases")
        p.add_argument(
            "--rounds",
            type=int,
            default=None,
            metavar="N",
            help="repeats of the case grid (default: by profile)",
        )
        p.add_argument("--quiet", action="store_true")

    rec = subparsers.add_parser(
        "record", help="write a golden file of a kernel's outputs (pre-merge differential)"
    )
    common(rec)
    rec.add_argument("--out", required=True, metavar="FILE", help="golden file (.json or .json.gz)")
    rec.set_defaults(func=run_record)

    dif = subparsers.add_parser("diff", help="replay a golden file (or a base kernel) and judge every change")
    common(dif)
    dif.add_argument("--against", metavar="FILE", default=None, help="golden file written by record")
    dif.add_argument("--base", metavar="SPEC", default=None, help="record this kernel in-process instead")
    dif.add_argument(
        "--mutant",
        nargs="+",
        metavar="NAME",
        default=None,
        help="diff against catalogue mutants of kernels/ ('all' for every one)",
    )
    dif.add_argument(
        "--fail-fast", action="store_true", help="stop after the first case with a new answer wrong"
    )
    dif.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant")
    dif.add_argument("--json", metavar="OUT", default=None, help="write the diff (or mutant table) as JSON")
    dif.set_defaults(func=run_diff)
