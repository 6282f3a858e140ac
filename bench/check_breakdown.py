"""Where `python -m harness check` spends its time, property by property (issue 32).

    python bench/check_breakdown.py [--kernel SPEC] [--profile P] [--device cpu|cuda] [--seed N]
                                    [--only NAME ...] [--max-examples N] [--cold] [--warm]
                                    [--plan-gpu] [--prewarm] [--json FILE] [--varied]

Runs the check in this process (no supervised worker; the same kernel, profile, device and seed
defaults as ``python -m harness check``) and prints, per property: verdict, wall seconds, cases,
kernel calls, seconds inside kernel calls (synchronised on CUDA), host seconds split into case
building (``build``: logits from their seed, cast, copy to the device), the float64 oracle
(``oracle``) and the rest (Hypothesis, judging, comparisons), then Triton compiles: how many
specialisations were compiled (``comp``) or loaded from the on-disk cache (``load``) and their
seconds (Triton's own hooks, harness/compiles/keys.py ``CompileLog``; on a GPU only), and the
distinct specialisation keys the property's launches used (``keys``) and how many of them no
earlier property had used (``new``: what a cold run compiles there). ``--varied`` adds, per
property, which kernel parameters took several classes (the reasons for the count).

- ``--cold``: a run in a fresh process with an empty ``TRITON_CACHE_DIR`` (a temporary directory).
  ``--warm``: a run in a fresh process on a cache that holds what the cold run compiled (or the
  user's cache when ``--cold`` is not given). Both: cold, then warm, on the same cache. Neither: one
  run in this process on the current cache.
- ``--prewarm`` (GPU): compile the run's planned keys in parallel before the properties
  (harness/compiles/prewarm.py); the header gives its seconds, and ``load`` then counts what it compiled.
- ``--plan-gpu``: no kernel runs; the keys an H200 would compile are worked out on this machine
  (harness/compiles/planning.py: our kernels' compiled-Triton launch plan, oracle answers). Default profile
  then ``gpu``. Times are those of the planning run, not of a GPU.

On the CPU nothing compiles (the interpreter); keys are computed as Triton would (compile_keys.py).
On a GPU (our kernels, gpu profile, both caches):

    python bench/check_breakdown.py --profile gpu --device cuda --seed 1 --cold --warm --varied \\
        --json out/breakdown-gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import kernels._device  # noqa: E402,F401  (selects TRITON_INTERPRET before triton is imported)

COLUMNS = ("property", "verdict", "wall", "cases", "calls", "kernel", "build", "oracle", "other",
           "comp", "load", "comp_s", "keys", "new")


def parse(argv=None) -> argparse.Namespace:
    from harness.plugins import DEFAULT_KERNEL_SPEC
    from harness.profiles import PROFILES

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", default=DEFAULT_KERNEL_SPEC)
    p.add_argument("--profile", choices=sorted(PROFILES), default=None)
    p.add_argument("--device", choices=("cpu", "cuda"), default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--only", nargs="+", default=None)
    p.add_argument("--max-examples", type=int, default=None)
    p.add_argument("--cold", action="store_true", help="a fresh process on an empty Triton cache")
    p.add_argument("--warm", action="store_true", help="a fresh process on a filled Triton cache")
    p.add_argument("--plan-gpu", action="store_true", help="keys an H200 would compile, worked out here")
    p.add_argument("--prewarm", action="store_true",
                   help="GPU: compile the run's planned keys in parallel first (harness/compiles/prewarm.py)")
    p.add_argument("--varied", action="store_true", help="print what varied between each property's keys")
    p.add_argument("--json", metavar="FILE", default=None, help="write the runs' rows as JSON")
    p.add_argument("--child-json", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def one_run(args) -> dict:
    """One check in this process: ``{"label", "seed", "profile", "rows": [...], "seconds"}``."""
    import dataclasses
    import warnings

    import torch

    from harness.compiles.keys import CompileLog, distinct, per_kernel, varied
    from harness.profiles import PROFILES, active_profile_name
    from harness.properties.base import RunContext
    from harness.runner import run_properties, select_properties
    from harness.timing.time_split import TimedKernel, TimeSplit

    warnings.filterwarnings("ignore", category=RuntimeWarning)
    name = args.profile or ("gpu" if args.plan_gpu else active_profile_name())
    profile = PROFILES[name]
    if args.max_examples:
        profile = dataclasses.replace(profile, max_examples=args.max_examples)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    seed = args.seed
    if seed is None:
        seed = 0 if name == "ci" else int.from_bytes(os.urandom(4), "little")
    ctx = RunContext(profile=profile, device=device, seed=seed, kernel_spec=args.kernel)
    split = TimeSplit()
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    rows, seen = [], set()
    started = time.perf_counter()
    prewarm_s = None
    if args.prewarm and device.type == "cuda" and not args.plan_gpu:
        from harness.compiles.prewarm import prewarm

        prewarm(name, seed, device="cuda", kernel_spec=args.kernel, max_examples=args.max_examples,
                names=args.only, say=lambda s: print(s, file=sys.stderr, flush=True))
        prewarm_s = time.perf_counter() - started
    with _key_source(args, ctx) as (kernel, keys), CompileLog() as compiles, split.instrument():
        timed = TimedKernel(kernel, split, sync)
        for prop in select_properties(args.only):
            mark, cmark, before = keys.mark(), compiles.mark(), split.snapshot()
            t0 = time.perf_counter()
            (res,) = run_properties(timed, ctx, [prop], allow_subprocess=False)
            wall = time.perf_counter() - t0
            secs, calls = TimeSplit.delta(before, split.snapshot())
            used = distinct(keys.since(mark))
            events = compiles.since(cmark)
            row = {
                "property": prop.name, "verdict": res.verdict, "wall": wall, "cases": res.cases,
                "calls": calls.get("kernel", 0), "kernel": secs.get("kernel", 0.0),
                "build": secs.get("build", 0.0), "oracle": secs.get("oracle", 0.0),
                "comp": sum(e.cache_hit is not True for e in events),
                "load": sum(e.cache_hit is True for e in events),
                "comp_s": float(sum(e.seconds for e in events)),
                "keys": len(used), "new": len(used - seen),
                "per_kernel": dict(per_kernel(used)), "varied": varied(used),
                "weakest_tv": max((s.detectable_tv for s in res.statistics), default=None),
                "assertions": len(res.statistics),
                "key_list": sorted(key_text(k) for k in used),
            }
            row["other"] = max(0.0, wall - row["kernel"] - row["build"] - row["oracle"])
            seen |= used
            rows.append(row)
            print(f"  {prop.name}: {res.verdict} in {wall:.1f}s, {res.cases} cases, {row['keys']} keys "
                  f"({row['new']} new)", file=sys.stderr, flush=True)
    cache = os.environ.get("TRITON_CACHE_DIR", "default")
    label = "planned for an H200" if args.plan_gpu else f"{device.type}, cache {cache}"
    return {"label": label, "seed": seed, "profile": name, "device": device.type, "rows": rows,
            "seconds": time.perf_counter() - started, "compile_hooks": compiles.available,
            "distinct_keys": len(seen), "prewarm_s": prewarm_s}


def key_text(kernel_key) -> str:
    """One key as text: ``kernel|param=class,...`` (the JSON's ``key_list``, for comparing runs)."""
    kernel, key = kernel_key
    return kernel.rsplit(".", 1)[-1] + "|" + ",".join(f"{n}={c}" for n, c in key)


class _key_source:
    """``(kernel, log)``: the kernel and a real ``LaunchLog``, or under ``--plan-gpu`` the planned
    kernel and the planning log (harness/compiles/planning.py)."""

    def __init__(self, args, ctx):
        self.args, self.ctx = args, ctx

    def __enter__(self):
        from harness.compiles.keys import LaunchLog
        from harness.plugins import load_kernel

        if self.args.plan_gpu:
            from harness.compiles.planning import GPU_DEVICE_TYPE, PlannedKernel, gpu_planning

            self.ctx.extra["sized_for"] = GPU_DEVICE_TYPE
            # the statistical layer skips itself when this process's speed projects too slow; on the
            # H200 it runs, so the plan must too
            self.ctx.extra["stat_seconds_per_property"] = float("inf")
            self._cm = gpu_planning()
            log = self._cm.__enter__()
            return PlannedKernel(load_kernel(self.args.kernel)), log
        self._cm = LaunchLog()
        return load_kernel(self.args.kernel), self._cm.__enter__()

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


WIDTHS = (34, 9, 7, 6, 6, 7, 7, 7, 7, 5, 5, 7, 5, 5)
SECONDS = ("wall", "kernel", "build", "oracle", "other", "comp_s")


def _cells(values) -> str:
    """One table line: the first column left-aligned, floats with one decimal."""
    out = []
    for i, (v, w) in enumerate(zip(values, WIDTHS, strict=True)):
        text = f"{v:.1f}" if isinstance(v, float) else str(v)
        out.append(text.ljust(w) if i == 0 else text.rjust(w))
    return " ".join(out)


def table(run: dict) -> str:
    prewarmed = f" (prewarm {run['prewarm_s']:.1f}s)" if run.get("prewarm_s") is not None else ""
    head = (f"{run['label']} -- profile {run['profile']}, seed {run['seed']}, "
            f"{run['seconds']:.1f}s{prewarmed}, {run['distinct_keys']} distinct keys"
            + ("" if run["compile_hooks"] else " (no compile hooks: nothing compiles here)"))
    lines = [head, _cells(COLUMNS)]
    lines += [_cells(row[c] for c in COLUMNS) for row in run["rows"]]
    totals = [float(sum(r[c] for r in run["rows"])) if c in SECONDS else sum(r[c] for r in run["rows"])
              for c in COLUMNS[2:]]
    totals[-1] = run["distinct_keys"]  # "new" summed over properties: the run's distinct keys
    lines.append(_cells(["total", "", *totals]))
    return "\n".join(lines)


def varied_lines(run: dict) -> str:
    lines = []
    for row in run["rows"]:
        if not row["keys"]:
            continue
        per = ", ".join(f"{k} {n}" for k, n in sorted(row["per_kernel"].items()))
        lines.append(f"{row['property']}: {per}")
        for kernel, params in row["varied"].items():
            if params:
                what = "; ".join(f"{p} {'|'.join(v)}" for p, v in params.items())
                lines.append(f"    {kernel}: {what}")
    return "\n".join(lines)


def child(args, label: str, cache_dir: str | None) -> dict:
    env = dict(os.environ)
    if cache_dir:
        env["TRITON_CACHE_DIR"] = cache_dir
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    argv = [a for a in sys.argv[1:] if a not in ("--cold", "--warm")]
    subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--child-json", path], env=env,
                   check=True)
    with open(path) as fh:
        run = json.load(fh)
    os.unlink(path)
    run["label"] = f"{label}: {run['label']}"
    return run


def main(argv=None) -> int:
    args = parse(argv)
    if args.child_json:
        with open(args.child_json, "w") as fh:
            json.dump(one_run(args), fh)
        return 0
    if args.cold or args.warm:
        runs = []
        with tempfile.TemporaryDirectory(prefix="specfuzz-triton-cache-") as cache:
            if args.cold:
                runs.append(child(args, "cold", cache))
            if args.warm:
                runs.append(child(args, "warm", cache if args.cold else None))
    else:
        runs = [one_run(args)]
    for run in runs:
        print(table(run))
        if args.varied:
            print(varied_lines(run))
        print()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(runs, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
