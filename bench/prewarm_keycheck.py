"""Does a prewarmed specialisation serve the real launch? Triton's own cache keys, compared (GPU).

    python bench/prewarm_keycheck.py --seed S [--only NAME ...] [--profile gpu] [--jobs N]

Plan the keys a check of our kernels makes for ``--only`` (harness/compiles/prewarm.py
``planned_keys``) and compile them in ``--jobs`` processes as the prewarm does; then, in this process,
``warmup`` each of them (loads from the on-disk cache), note the keys Triton's in-memory caches then hold,
run the same properties for real, and print every Triton key the real launches added: a key the
prewarm should have built. Each is printed next to the closest prewarmed key of that kernel with
the characters that differ, which names the specialisation field (or launch option) the prewarm's
stand-in arguments get wrong. Exit 0 when no launch needed a key the prewarm did not build.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import kernels._device  # noqa: E402,F401  (selects TRITON_INTERPRET before triton is imported)


def triton_keys(functions) -> dict:
    """``{kernel name: set of Triton's in-memory cache keys}`` over every device."""
    out = {}
    for name, fn in functions.items():
        keys = set()
        for caches in getattr(fn, "device_caches", {}).values():
            keys |= set(caches[0])
        out[name] = keys
    return out


def closest(key: str, candidates) -> str | None:
    return max(candidates, key=lambda c: difflib.SequenceMatcher(None, c, key).ratio(), default=None)


def differing(a: str, b: str) -> str:
    parts = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag != "equal":
            parts.append(f"...{a[max(0, i1 - 40):i2 + 10]!r} -> ...{b[max(0, j1 - 40):j2 + 10]!r}")
    return "; ".join(parts[:4])


def main() -> int:
    import torch

    from harness.compiles.prewarm import compile_keys, jit_function, planned_keys, warmup_kwargs
    from harness.plugins import load_kernel
    from harness.profiles import PROFILES
    from harness.properties.base import RunContext
    from harness.runner import run_properties, select_properties

    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--profile", default="gpu")
    p.add_argument("--only", nargs="+", default=["structural"])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--limit", type=int, default=12)
    args = p.parse_args()

    t0 = time.perf_counter()
    planned = planned_keys(args.profile, args.seed, "cuda", args.jobs, args.only)
    t_plan = time.perf_counter() - t0
    print(f"{len(planned)} keys planned in {t_plan:.1f}s", flush=True)
    # Compiled in parallel into the on-disk cache first (a serial compile of ~200 keys here took over
    # 200 s on the H100), so the warmups below only load them into this process's in-memory caches.
    compiled, errors = compile_keys(planned, args.jobs)
    print(f"{compiled} compiled in parallel in {time.perf_counter() - t0 - t_plan:.1f}s, "
          f"{len(errors)} failed {errors[:2]}", flush=True)
    t_plan = time.perf_counter() - t0
    functions, failed = {}, []
    for kernel, key in sorted(planned):
        fn = jit_function(kernel)
        functions[kernel.rsplit(".", 1)[-1]] = fn
        try:
            fn.warmup(grid=(1,), **warmup_kwargs(fn, key))
        except Exception as exc:  # noqa: BLE001 -- reported, the run goes on
            failed.append(f"{kernel}: {type(exc).__name__}: {exc}"[:300])
    t_warm = time.perf_counter() - t0 - t_plan
    warmed = triton_keys(functions)
    print(f"{len(planned)} keys planned and compiled in {t_plan:.1f}s, warmed up here in {t_warm:.1f}s, "
          f"{sum(map(len, warmed.values()))} Triton keys; {len(failed)} warmups failed {failed[:3]}",
          flush=True)

    ctx = RunContext(profile=PROFILES[args.profile], device=torch.device("cuda"), seed=args.seed,
                     kernel_spec="harness.adapters.triton_kernels:kernel")
    kernel = load_kernel(ctx.kernel_spec)
    t1 = time.perf_counter()
    for prop in select_properties(args.only):
        (res,) = run_properties(kernel, ctx, [prop], allow_subprocess=False)
        print(f"{prop.name}: {res.verdict}, {res.cases} cases, {time.perf_counter() - t1:.1f}s so far",
              flush=True)
    # kernels the run launched that no planned key named
    from kernels.function_hashes import launched_kernels

    for name, fn in launched_kernels().items():
        functions.setdefault(name.rsplit(".", 1)[-1], fn)
    after = triton_keys(functions)
    missing = {n: after[n] - warmed.get(n, set()) for n in after if after[n] - warmed.get(n, set())}
    unused = sum(len(warmed[n] - after.get(n, set())) for n in warmed)
    print(f"run added {sum(map(len, missing.values()))} Triton keys the prewarm did not build "
          f"({unused} prewarmed keys unused)")
    shown = 0
    for name, keys in sorted(missing.items()):
        print(f"\n== {name}: {len(keys)} new, {len(warmed.get(name, ()))} prewarmed")
        for key in sorted(keys):
            if shown >= args.limit:
                break
            near = closest(key, warmed.get(name, ()))
            print(f"  launch:  {key[:600]}")
            print(f"  nearest: {near[:600] if near else None}")
            if near:
                print(f"  differs: {differing(near, key)}")
            shown += 1
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
