"""Compile a run's Triton specialisations before it starts: all of them, in parallel, once.

A cold Triton cache makes a run compile each specialisation key (harness/compiles/keys.py) the first
time a launch needs it, one after another in the process that launches, and under ``pytest -n auto``
in every worker that needs it at the same time. With the vocabulary ladder and the shape palette
(harness/generation/vocab_ladder.py, harness/generation/shape_palette.py) the keys of a run are few and known
before it
starts, so they can be compiled up front:

1. ``planned_keys``: the keys a ``check`` of our kernels makes for a profile and seed, worked out
   without launching anything (harness/compiles/planning.py: the same cases, calls and launch plan as the
   real run, launches recorded instead of made); one process per property, ``jobs`` at a time;
2. ``compile_keys``: each key compiled by Triton itself (``JITFunction.warmup`` with arguments built
   from the key: ``warmup_kwargs``), ``jobs`` processes at a time, into the on-disk cache that every
   later process of this user reads (``TRITON_CACHE_DIR`` or ``~/.triton/cache``).

3. a manifest per run (``Manifests``): once a run's keys are compiled, their list is stored next to
   the binaries, in ``<Triton cache dir>/specfuzz-prewarm/<build>/<run>.json``, where ``build``
   digests what decides a binary (Triton and CUDA versions, the GPU's compute capability, the
   function hash of every launched kernel: kernels/function_hashes.py) and ``run`` the profile,
   seed, examples, properties and kernel. The same run again plans and compiles nothing; another
   run plans, then compiles only the keys no manifest of this build lists. Emptying the Triton
   cache removes the manifests with the binaries; a manifest that outlived its binaries only makes
   the launches compile on demand.

A later run then only loads binaries. Keys a run draws that were not planned (a failure's shrinking)
still compile on demand, so prewarming can make a run faster, never different. GPU only: under the
interpreter nothing compiles (``warmup`` returns at once), which is what the CPU tests rely on to
check the plumbing. ``python -m harness.compiles.prewarm --profile ci --seed 0`` is what conftest.py runs in
the xdist controller before the workers start; ``check --prewarm`` runs it before its properties.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import kernels._device  # noqa: F401  (selects TRITON_INTERPRET before triton is imported)

OUR_KERNELS = "harness.adapters.triton_kernels:kernel"
INT_FOR_CLASS = {"1": 1, "i32/16": 16, "i32": 17, "i64/16": 2**32, "i64": 2**32 + 1, "u64/16": 2**63 + 16,
                 "u64": 2**63 + 1, "u1": True, "fp32": 1.5, "None": None}


class Pointer:
    """Stands for a tensor argument in ``warmup``: Triton reads only its ``dtype`` and whether
    ``data_ptr()`` is a multiple of 16 (nothing is launched, so nothing is dereferenced)."""

    def __init__(self, dtype, aligned: bool):
        self.dtype, self._address = dtype, 1 << 12 if aligned else (1 << 12) + 2

    def data_ptr(self) -> int:
        return self._address


def value_for(cls: str, constexpr: bool):
    """An argument of class ``cls`` (``compile_keys.arg_class`` / a constexpr's repr)."""
    if constexpr:
        return ast.literal_eval(cls)
    if cls.startswith("*"):
        import torch

        name, _, aligned = cls[1:].partition("/")
        return Pointer(getattr(torch, name), aligned == "16")
    if cls not in INT_FOR_CLASS:
        raise ValueError(f"no argument stands for class {cls!r}")
    return INT_FOR_CLASS[cls]


def jit_function(kernel: str):
    """The ``JITFunction`` (or interpreted function) named ``module.qualname`` by a key record."""
    module, _, name = kernel.rpartition(".")
    obj = getattr(importlib.import_module(module), name)
    return getattr(obj, "fn", obj)  # kernels.launch.FastLaunch wraps the JIT function


def warmup_kwargs(fn, key: tuple) -> dict:
    """Keyword arguments whose specialisation key is ``key``: every parameter by name, then the
    launch options (``num_warps``, ``maxnreg``, ``launch_pdl``, ...)."""
    from harness.compiles.keys import kernel_params

    params = {p.name: p for p in kernel_params(fn)}
    out = {}
    for name, cls in key:
        param = params.get(name)
        out[name] = value_for(cls, param.constexpr) if param else ast.literal_eval(cls)
    return out


def _compile_some(records: list) -> tuple[int, list[str]]:
    """In a worker: warm up each ``(kernel, key)``; returns (compiled, errors)."""
    done, errors = 0, []
    for kernel, key in records:
        try:
            fn = jit_function(kernel)
            fn.warmup(grid=(1,), **warmup_kwargs(fn, key))
            done += 1
        except Exception as exc:  # noqa: BLE001 -- a key that cannot be warmed up compiles on demand
            errors.append(f"{kernel.rsplit('.', 1)[-1]}: {type(exc).__name__}: {str(exc)[:200]}")
    return done, errors


def _plan_one(args: tuple) -> tuple[str, float, list, str]:
    """In a worker: ``(property, seconds, keys, trouble)``, the keys one property of a planned check
    launches. A plan must pass: a failing or erroring one has left the real run's cases (Hypothesis
    shrinks), so ``trouble`` says why, and the keys planned so far are still returned (a harness error
    there must not stop the prewarm)."""
    kernel_spec, profile_name, max_examples, seed, device, name = args
    import dataclasses

    import torch

    from harness.compiles.planning import GPU_DEVICE_TYPE, PlannedKernel, gpu_planning
    from harness.plugins import load_kernel
    from harness.profiles import PROFILES
    from harness.properties import REGISTRY
    from harness.properties.base import RunContext

    profile = PROFILES[profile_name]
    if max_examples:
        profile = dataclasses.replace(profile, max_examples=max_examples)
    ctx = RunContext(profile, torch.device(device), 0 if name == CORPUS else seed, kernel_spec)
    ctx.extra.update(sized_for=GPU_DEVICE_TYPE, stat_seconds_per_property=float("inf"))
    started = time.perf_counter()
    with gpu_planning() as log:
        constant = getattr(REGISTRY.get(name), "plans_with_constant_answers", False)
        kernel = PlannedKernel(load_kernel(kernel_spec), constant_answers=constant)
        trouble = ""
        try:
            if name == CORPUS:
                _replay_corpus(kernel, ctx)
            elif REGISTRY[name].claimed(kernel):
                result = REGISTRY[name].run(kernel, ctx)
                if result.verdict not in ("pass", "not claimed"):
                    trouble = f"{result.verdict}: {result.note[:300]}"
                    if result.failures:
                        trouble += f" {str(result.failures[0])[:300]}"
        except Exception as exc:  # noqa: BLE001 -- what was planned so far is still worth compiling
            trouble = f"{type(exc).__name__}: {str(exc)[:300]}"
    keys = sorted({(r.kernel, r.key) for r in log.records})
    return name, time.perf_counter() - started, keys, trouble


CORPUS = "corpus replay"  # a planning task beside the properties: the regression corpus (``--corpus``)


def _replay_corpus(kernel, ctx) -> None:
    """Every regression-corpus entry replayed on ``kernel``, as tests/harness/test_corpus.py replays
    them on our kernels (ci profile, seed 0): on a GPU each entry's shapes are their own keys."""
    from harness.campaigns.corpus import corpus_files, replay_entry

    for path in corpus_files():
        replay_entry(path, kernel, ctx)


def _one_thread() -> None:
    """Pool workers run one per core: torch's own thread pool in each would oversubscribe them."""
    import torch

    torch.set_num_threads(1)


def _pool(jobs: int):
    return ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=_one_thread)


def planned_keys(profile: str, seed: int, device: str, jobs: int, names=None,
                 kernel_spec: str = OUR_KERNELS, max_examples: int | None = None,
                 seconds: dict | None = None) -> set:
    """The distinct ``(kernel, key)`` a check of ``profile`` and ``seed`` launches (module docstring);
    ``jobs`` 0 plans in this process. ``seconds``, if given, receives each property's planning time."""
    from harness.properties import REGISTRY

    work = [(kernel_spec, profile, max_examples, seed, device, n) for n in (names or list(REGISTRY))]
    if jobs == 0:
        planned = [_plan_one(args) for args in work]
    else:
        with _pool(jobs) as pool:
            planned = list(pool.map(_plan_one, work))
    if seconds is not None:
        seconds.update({name: took for name, took, _, _ in planned})
    return {k for _, _, keys, _ in planned for k in keys}


def compile_keys(keys, jobs: int) -> tuple[int, list[str]]:
    """Compile every key, ``jobs`` processes at a time (0: in this process); (compiled, errors)."""
    records = sorted(keys)
    if jobs == 0:
        return _compile_some(records)
    parts = [records[i::jobs] for i in range(jobs)]
    with _pool(jobs) as pool:
        results = list(pool.map(_compile_some, [p for p in parts if p]))
    return sum(r[0] for r in results), [e for r in results for e in r[1]]


class Manifests:
    """The runs whose keys were compiled into one Triton cache for one build (module docstring, 3)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @staticmethod
    def for_this_build(device: str = "cuda") -> Manifests | None:
        """The manifests of this process's build in the Triton cache it uses; None under the
        interpreter (nothing is compiled there)."""
        import kernels._device as mode

        if mode.INTERPRETING or device != "cuda":
            return None
        import torch
        import triton
        from triton import knobs

        from kernels.function_hashes import launched_kernels

        parts = [triton.__version__, str(torch.version.cuda), str(torch.cuda.get_device_capability())]
        parts += [f"{name}={fn.cache_key}" for name, fn in sorted(launched_kernels().items())]
        build = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]
        return Manifests(Path(knobs.cache.dir) / "specfuzz-prewarm" / build)

    @staticmethod
    def run_name(profile: str, seed: int, max_examples, names, kernel_spec: str) -> str:
        what = [profile, seed, max_examples, sorted(names) if names else None, kernel_spec]
        return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:24]

    def keys_of(self, run: str) -> set | None:
        try:
            records = json.loads((self.folder / f"{run}.json").read_text())
        except (OSError, ValueError):
            return None
        return {(kernel, tuple(tuple(item) for item in key)) for kernel, key in records}

    def compiled(self) -> set:
        """Every key any run of this build compiled."""
        runs = [p.stem for p in self.folder.glob("*.json")] if self.folder.is_dir() else []
        return set().union(*(self.keys_of(run) or set() for run in runs))

    def record(self, run: str, keys) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{run}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(sorted(keys)))
        tmp.replace(self.folder / f"{run}.json")  # atomic: a concurrent reader sees all or nothing


def prewarm(profile: str, seed: int, jobs: int | None = None, device: str = "cuda",
            kernel_spec: str = OUR_KERNELS, say=print, max_examples: int | None = None,
            names=None, manifests: Manifests | None | str = "this build", corpus: bool = False) -> int:
    """Plan and compile a check's keys; returns the number of keys the run launches that are now
    compiled. Only our kernels are planned. ``manifests``: where compiled runs are recorded
    (default: this build's, in the Triton cache; None: plan and compile every time). ``corpus``: also
    the regression corpus's replay (``pytest -n auto``'s controller: tests/harness/test_corpus.py).

    Planning and compiling share one pool and overlap: a property's new keys are queued for
    compiling as soon as its plan is done (one key per task, so the pool stays balanced), while
    the slower properties are still planning."""
    if kernel_spec != OUR_KERNELS:
        say(f"prewarm: skipped (plans only {OUR_KERNELS})")
        return 0
    if manifests == "this build":
        manifests = Manifests.for_this_build(device)
    spec_key = kernel_spec + (" + corpus" if corpus else "")
    run = Manifests.run_name(profile, seed, max_examples, names, spec_key)
    started = time.perf_counter()
    known = manifests.keys_of(run) if manifests is not None else None
    if known is not None:
        say(f"prewarm: the {len(known)} specialisations of this run are compiled already "
            f"({manifests.folder / run}.json, {time.perf_counter() - started:.1f}s)")
        return len(known)
    jobs = max(1, os.cpu_count() or 1) if jobs is None else jobs
    from harness.properties import REGISTRY

    work = [(kernel_spec, profile, max_examples, seed, device, n)
            for n in [*(names or list(REGISTRY)), *([CORPUS] if corpus else [])]]
    skip = manifests.compiled() if manifests is not None else set()
    keys, queued, seconds, done, errors, troubles = set(), set(), {}, 0, [], []
    if jobs == 0:
        for args in work:
            name, took, planned, trouble = _plan_one(args)
            seconds[name] = took
            keys.update(planned)
            if trouble:
                troubles.append(f"{name}: {trouble}")
        planned_at = time.perf_counter()
        done, errors = compile_keys(keys - skip, 0)
    else:
        with _pool(jobs) as pool:
            plans = [pool.submit(_plan_one, args) for args in work]
            compiles = []
            for future in as_completed(plans):
                name, took, planned, trouble = future.result()
                seconds[name] = took
                keys.update(planned)
                if trouble:
                    troubles.append(f"{name}: {trouble}")
                for record in sorted(set(planned) - skip - queued):
                    queued.add(record)
                    compiles.append(pool.submit(_compile_some, [record]))
            planned_at = time.perf_counter()
            for future in compiles:
                n, errs = future.result()
                done, errors = done + n, errors + errs
    if manifests is not None:  # keys that failed to warm up compile on demand, in this run and later ones
        manifests.record(run, keys)
    planned = planned_at - started
    slowest = ", ".join(f"{n} {s:.1f}s" for n, s in sorted(seconds.items(), key=lambda x: -x[1])[:3])
    say(f"prewarm: {len(keys)} specialisations planned in {planned:.1f}s (slowest: {slowest}), {done} "
        f"of them new, all compiled {time.perf_counter() - planned_at:.1f}s after the last plan "
        f"({time.perf_counter() - started:.1f}s in all, {jobs} processes)"
        + (f"; {len(errors)} failed (they compile on demand): {errors[:3]}" if errors else ""))
    for trouble in troubles:  # the run will compile what this plan missed
        say(f"prewarm: the plan of {trouble}")
    return len(keys) - len(errors)


def main(argv=None) -> int:
    from harness.profiles import PROFILES

    p = argparse.ArgumentParser(description="compile a check's Triton specialisations in parallel")
    p.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=None, help="processes (default: one per CPU)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--corpus", action="store_true", help="also the regression corpus's replay")
    args = p.parse_args(argv)
    prewarm(args.profile, args.seed, args.jobs, args.device, corpus=args.corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
