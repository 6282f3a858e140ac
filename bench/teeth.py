"""Proof of teeth: run ``harness check`` on every broken kernel and on the correct kernels over many seeds.

    python bench/teeth.py [--profile ci] [--device cpu|cuda] [--seeds 20] [--correct SPEC ...]
                          [--broken NAME ...] [--skip-broken] [--only PROPERTY ...] [--without PROPERTY]
                          [--time-limit SECONDS] [--in-process]

For each broken kernel of ``harness.broken`` it runs every registered property in registry order with
fail-fast (what ``python -m harness check --fail-fast`` does) and prints the property that caught it
and the seconds it took; a broken kernel nobody catches is listed as ``NOT CAUGHT``. With
``--without P``, a kernel that P caught is run again on every other property, and the column
``without P`` names what catches it then (``only P``: nothing else does). Then it runs the
full check of each correct kernel (default: torch_eager and our Triton kernels) with seeds 0..N-1 and
counts false alarms (any failing property). Exit status 1 if a broken kernel escapes or a correct
kernel fails. Runs in one process so imports are paid once; kernel calls run in a supervised worker
per kernel (harness/execution/supervisor.py), so the entries that segfault, exit or hang are caught as
``crash`` / ``hang`` findings (an entry whose finding is of another class counts as escaped), and
entries whose fault needs another device (``cuda_oob_store`` on the CPU) are listed as skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import kernels._device  # noqa: E402,F401  (selects TRITON_INTERPRET before triton is imported)
from harness.broken import CATALOGUE  # noqa: E402
from harness.execution.supervisor import add_supervision_args, close, profile_with_limits, supervise  # noqa: E402
from harness.plugins import load_kernel  # noqa: E402
from harness.profiles import PROFILES  # noqa: E402
from harness.properties.base import ERROR, FAIL, NOT_CLAIMED, SKIPPED, RunContext  # noqa: E402
from harness.runner import run_properties, select_properties  # noqa: E402

CORRECT = ("harness.implementations.torch_eager:kernel", "harness.adapters.triton_kernels:kernel")
# Teeth, not speed, are measured: on a loaded machine the statistical layer's time projection would
# time-size its properties (fewer samples, harness/properties/statistical.py) and a broken kernel only
# full-size statistics catch would read NOT CAUGHT. Broken kernels get this budget per statistical
# property.
BROKEN_STAT_SECONDS = 1800.0


def check(spec: str, args, device: torch.device, seed: int, fail_fast: bool, only=None, without=None):
    profile = profile_with_limits(PROFILES[args.profile], args)
    kernel = supervise(load_kernel(spec), spec, profile, args.in_process)
    ctx = RunContext(profile, device, seed, spec, fail_fast=fail_fast)
    if spec.startswith("harness.broken."):
        ctx.extra["stat_seconds_per_property"] = BROKEN_STAT_SECONDS
    started = time.perf_counter()
    properties = [p for p in select_properties(only) if p.name != without]
    try:
        results = run_properties(kernel, ctx, properties, allow_subprocess=False)
    finally:
        close(kernel)
    return results, time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--correct", nargs="*", default=list(CORRECT))
    parser.add_argument("--broken", nargs="*", default=None, help="names (default: the whole catalogue)")
    parser.add_argument("--skip-broken", action="store_true")
    parser.add_argument(
        "--only", nargs="*", default=None,
        help="properties to run, for the broken and the correct kernels (default: all)"
    )
    parser.add_argument("--without", default=None, metavar="PROPERTY",
                        help="for kernels PROPERTY catches, also report what catches them without it")
    add_supervision_args(parser)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    escaped, alarms = 0, 0

    if not args.skip_broken:
        print(f"## broken kernels (profile {args.profile}, device {device}, seed 0, fail-fast)")
        other = f"  without {args.without}" if args.without else ""
        print(f"{'kernel':40s} {'caught by':34s} {'expected':34s} {'secs':>7s}{other}")
        for entry in CATALOGUE:
            if args.broken and entry.name not in args.broken:
                continue
            if device.type not in entry.devices:
                print(f"{entry.name:40s} {'skipped: faults only on ' + '/'.join(entry.devices):34s}")
                continue
            results, secs = check(entry.spec, args, device, 0, fail_fast=True, only=args.only)
            failed = [r for r in results if r.verdict == FAIL]
            if entry.fault:  # a fault kernel must end as a finding of its class, not any failure
                failed = [r for r in failed if r.failures and r.failures[0].cls == entry.fault]
            caught = failed[0].name + (f" ({entry.fault})" if entry.fault else "") if failed else "NOT CAUGHT"
            escaped += not failed
            errors = [r.name for r in results if r.verdict == ERROR]
            skipped = [r.name for r in results if r.verdict == SKIPPED]
            note = f"  (errors: {errors})" if errors else ""
            note += f"  (skipped: {skipped})" if skipped else ""
            if args.without and caught == args.without:
                again, more = check(entry.spec, args, device, 0, fail_fast=True, only=args.only,
                                    without=args.without)
                others = [r.name for r in again if r.verdict == FAIL]
                note = f"  {others[0] if others else 'only ' + args.without} ({more:.0f}s){note}"
            print(
                f"{entry.name:40s} {caught:34s} {','.join(entry.expected):34s} {secs:7.1f}{note}", flush=True
            )

    for spec in args.correct:
        print(f"\n## correct kernel {spec}: {args.seeds} seeds (profile {args.profile}, device {device})")
        total, not_run = 0.0, set()
        for seed in range(args.seeds):
            results, secs = check(spec, args, device, seed, fail_fast=False, only=args.only)
            total += secs
            bad = [
                (r.name, r.verdict, (r.failures[0].message if r.failures else r.note)[:120])
                for r in results
                if r.verdict in (FAIL, ERROR)
            ]
            not_run |= {r.name for r in results if r.verdict == NOT_CLAIMED}
            assertions = sum(len(r.statistics) for r in results)
            alpha = sum(s.alpha for r in results for s in r.statistics)
            alarms += bool(bad)
            print(
                f"seed {seed:3d}: {'FALSE ALARM ' + str(bad) if bad else 'pass'}  {secs:6.1f}s  "
                f"({assertions} statistical assertions, family-wise alpha {alpha:.2g})",
                flush=True,
            )
        print(
            f"{spec}: {args.seeds} seeds, mean {total / max(args.seeds, 1):.1f}s per check; "
            f"not claimed / not run: {sorted(not_run)}"
        )

    print(f"\nbroken kernels not caught: {escaped}; correct-kernel runs with a false alarm: {alarms}")
    return 1 if escaped or alarms else 0


if __name__ == "__main__":
    sys.exit(main())
