"""Does a prewarmed specialisation serve the real launch? Triton's own cache keys, compared (GPU).

    python bench/prewarm_keycheck.py --seed S [--only NAME ...] [--profile gpu] [--jobs N]

Plan the keys a check of our kernels makes for ``--only`` (harness/compiles/prewarm.py
``planned_keys``) and compile them in ``--jobs`` processes as the prewarm does; then, in this process,
``warmup`` each of them (loads from the on-disk cache), note the keys Triton's in-memory caches then hold,
run the same properties for real, and print every Triton key the real launches added: a key the
prewarm should have built. Each is printed next to the closest prewarmed key of that kernel with
the characters that differ, which names the specialisation field (or launch option) the prewarm's
stand-in arguments get wrong. Exit 0 when no launch needed a key the prewarm did not build.

    python bench/prewarm_keycheck.py --seed S --calls [--only NAME ...] [--supervised]

instead compares the kernel calls themselves: each property is planned in this process (as a
prewarm worker does) and run for real (in this process, or with ``--supervised`` through check's
worker), every call's layout (shapes, strides, dtypes, alignment, flags and a digest of the small
tensors) is logged, and the first call where the two sequences part is printed. A plan that makes
other calls than the run it stands for misses that run's keys.

    python bench/prewarm_keycheck.py --seed S --check [--only NAME ...] [--profile gpu]

runs ``python -m harness check --in-process`` itself (every property in check's order, one run
context, no prewarm) with every Triton launch's specialisation key logged per property, beside each
property's own plan (made as the prewarm makes it, one pool task per property). Per property it
prints the launched keys its plan lacks (``unplanned``), how many of those another property's plan
has, and the planned keys it never launched: whether the misses come from what runs before a
property in check's process. Exit 0 when no property launched a key its plan lacks.
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


def call_layout(what: str, batch) -> tuple:
    """What a call's specialisation keys can depend on (and the small tensors' content)."""
    import hashlib

    import torch

    def tensor(t):
        if t is None:
            return None
        return (str(t.dtype), tuple(t.shape), tuple(t.stride()), t.data_ptr() % 16)
    small = hashlib.sha1()
    for name in ("cu_num_draft_tokens", "draft_token_ids", "temperature"):
        t = getattr(batch, name, None)
        if isinstance(t, torch.Tensor):
            small.update(t.detach().cpu().numpy().tobytes())
    return (what, batch.method, tensor(batch.target_logits), tensor(batch.draft_logits),
            getattr(batch, "want_logprobs", None), getattr(batch, "max_chunk_bytes", None),
            small.hexdigest()[:10])


class LoggedKernel:
    """A kernel whose ``verify`` / ``random_draws`` calls are logged (``call_layout``)."""

    def __init__(self, inner, log: list):
        self._inner, self._log = inner, log

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def verify(self, batch):
        self._log.append(call_layout("verify", batch))
        return self._inner.verify(batch)

    def random_draws(self, batch):
        self._log.append(call_layout("random_draws", batch))
        return self._inner.random_draws(batch)


def compare_calls(args) -> int:
    """``--calls``: planned and real call sequences per property (module docstring)."""
    import torch

    from harness.compiles.planning import GPU_DEVICE_TYPE, PlannedKernel, gpu_planning
    from harness.execution.supervisor import supervise
    from harness.plugins import load_kernel
    from harness.profiles import PROFILES
    from harness.properties import REGISTRY
    from harness.properties.base import RunContext
    from harness.runner import run_properties

    spec = "harness.adapters.triton_kernels:kernel"
    profile = PROFILES[args.profile]
    parted = 0
    for name in args.only:
        planned, real = [], []
        ctx = RunContext(profile, torch.device(args.device), args.seed, spec)
        ctx.extra.update(sized_for=GPU_DEVICE_TYPE, stat_seconds_per_property=float("inf"))
        with gpu_planning():
            REGISTRY[name].run(LoggedKernel(PlannedKernel(load_kernel(spec)), planned), ctx)
        ctx = RunContext(profile, torch.device(args.device), args.seed, spec)
        kernel = load_kernel(spec)
        if args.supervised:
            kernel = supervise(kernel, spec, profile, False)
        (res,) = run_properties(LoggedKernel(kernel, real), ctx, [REGISTRY[name]], allow_subprocess=False)
        first = next((i for i, (a, b) in enumerate(zip(planned, real, strict=False)) if a != b), None)
        if first is None and len(planned) != len(real):
            first = min(len(planned), len(real))
        note = (res.note or (str(res.failures[0])[:300] if res.failures else ""))
        print(f"{name}: {res.verdict} {note}; {len(planned)} planned calls, {len(real)} real; "
              + ("the same" if first is None else f"first difference at call {first}"), flush=True)
        if first is not None:
            parted += 1
            for i in range(max(0, first - 1), min(first + 3, max(len(planned), len(real)))):
                print(f"  plan [{i}] {planned[i] if i < len(planned) else '-'}")
                print(f"  real [{i}] {real[i] if i < len(real) else '-'}")
    return 1 if parted else 0


def check_in_order(args) -> int:
    """``--check``: per-property plans against one in-process ``check`` (module docstring)."""
    from harness import cli
    from harness.compiles.keys import LaunchLog
    from harness.compiles.prewarm import OUR_KERNELS, _plan_one, _pool
    from harness.properties import REGISTRY

    names = args.only or list(REGISTRY)
    t0 = time.perf_counter()
    work = [(OUR_KERNELS, args.profile, None, args.seed, args.device, n) for n in names]
    if args.device == "cpu":  # under the interpreter: plan its launches (its tuning, no PDL, CPU sizes)
        import contextlib

        from harness.compiles import planning
        from kernels import tuning

        interpreter = {name: getattr(tuning, name) for name in planning.GPU_TUNING}
        gpu_planning = planning.gpu_planning
        with contextlib.ExitStack() as stack:
            stack.callback(setattr, planning, "gpu_planning", gpu_planning)
            stack.callback(setattr, planning, "GPU_DEVICE_TYPE", planning.GPU_DEVICE_TYPE)
            planning.gpu_planning = lambda: gpu_planning(interpreter, dependent_launches=False)
            planning.GPU_DEVICE_TYPE = "cpu"
            plans = {name: (took, set(keys), trouble)
                     for name, took, keys, trouble in map(_plan_one, work)}
    else:
        with _pool(args.jobs) as pool:
            plans = {name: (took, set(keys), trouble)
                     for name, took, keys, trouble in pool.map(_plan_one, work)}
    print(f"planned {len(names)} properties in {time.perf_counter() - t0:.1f}s", flush=True)
    launched: dict = {}
    originals = {}
    with LaunchLog() as log:
        for name in names:  # each property's launches are the log's records while it runs
            cls = type(REGISTRY[name])
            if cls in originals:
                continue
            originals[cls] = cls.run

            def tagged(self, kernel, ctx, _run=cls.run):
                mark = log.mark()
                try:
                    return _run(self, kernel, ctx)
                finally:
                    launched.setdefault(self.name, set()).update((r.kernel, r.key) for r in log.since(mark))
            cls.run = tagged
        argv = ["check", "--profile", args.profile, "--seed", str(args.seed), "--device", args.device,
                "--in-process", "--no-prewarm", "--quiet", "--only", *names]
        try:
            rc = cli.main(argv)
        finally:
            for cls, run in originals.items():
                cls.run = run
    every_plan = set().union(*(keys for _, keys, _ in plans.values()))
    total = 0
    print(f"check --in-process exit {rc}; per property: launched keys, unplanned (in another plan), "
          f"planned but not launched")
    for name in names:
        took, keys, trouble = plans[name]
        real = launched.get(name, set())
        missed = real - keys
        total += len(missed)
        print(f"{name:<28} plan {took:5.1f}s {len(keys):4d} keys; launched {len(real):4d}; unplanned "
              f"{len(missed):3d} ({len(missed & every_plan)}); not launched {len(keys - real):3d}"
              + (f"; plan trouble: {trouble[:200]}" if trouble else ""), flush=True)
        for kernel, key in sorted(missed)[: args.limit]:
            near = closest(str(key), [str(k) for kk, k in keys if kk == kernel])
            print(f"    {kernel.rsplit('.', 1)[-1]} {str(key)[:400]}")
            if near:
                print(f"      nearest planned differs: {differing(near, str(key))[:1200]}")
    return 1 if total else 0


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
    p.add_argument("--only", nargs="+", default=None, help="default: structural (--check: every property)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--limit", type=int, default=12)
    p.add_argument("--calls", action="store_true", help="compare planned and real kernel calls instead")
    p.add_argument("--supervised", action="store_true", help="--calls: the real run through check's worker")
    p.add_argument("--device", default="cuda", help="--calls, --check: where cases live (cpu: interpreter)")
    p.add_argument("--check", action="store_true",
                   help="per-property plans against one in-process check (every property by default)")
    args = p.parse_args()
    if args.only is None and not args.check:
        args.only = ["structural"]
    if args.calls:
        return compare_calls(args)
    if args.check:
        return check_in_order(args)

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
