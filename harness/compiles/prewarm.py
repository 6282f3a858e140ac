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
the xdist controller before the workers start. ``check`` (on a GPU, our kernels) runs it in the
background (``Prewarm``): its properties start at once, a key needed before the pool has it
compiles on demand as it would without a prewarm, and the pool compiles the keys of the earliest
properties first.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import heapq
import importlib
import json
import os
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path

import kernels._device  # noqa: F401  (selects TRITON_INTERPRET before triton is imported)

OUR_KERNELS = "harness.adapters.triton_kernels:kernel"
LOAD_BINARY = "harness.compiles.prewarm:load_binary"  # what a check's worker runs between calls
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


def load_binary(record) -> None:
    """Make ``(kernel, key)`` ready to launch in this process, as its first launch would: Triton
    loads the binary from its on-disk cache (compiles it when it is missing) into its in-memory
    cache, then onto the current GPU. What a check's worker does between calls
    (harness/execution/worker.py ``Preloader``), so that its launches find the binaries loaded."""
    init = getattr(_warm_up(*record), "_init_handles", None)  # Triton's lazy module load (cuModuleLoadData)
    if callable(init):
        init()


def _warm_up(kernel: str, key):
    """Triton's ``warmup`` of ``kernel`` with arguments whose specialisation key is ``key`` (compiles
    it, or loads it from the on-disk cache); returns Triton's compiled kernel."""
    fn = jit_function(kernel)
    return fn.warmup(grid=(1,), **warmup_kwargs(fn, tuple(tuple(item) for item in key)))


def _compile_some(records: list) -> tuple[int, list[str]]:
    """In a worker: warm up each ``(kernel, key)``; returns (compiled, errors)."""
    done, errors = 0, []
    for kernel, key in records:
        try:
            _warm_up(kernel, key)
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
        records = self.records_of(run)
        return None if records is None else set(records)

    def records_of(self, run: str) -> list | None:
        """The run's keys in the order it first launches them (by property), or None."""
        try:
            records = json.loads((self.folder / f"{run}.json").read_text())
        except (OSError, ValueError):
            return None
        return [(kernel, tuple(tuple(item) for item in key)) for kernel, key in records]

    def compiled(self) -> set:
        """Every key any run of this build compiled."""
        runs = [p.stem for p in self.folder.glob("*.json")] if self.folder.is_dir() else []
        return set().union(*(self.keys_of(run) or set() for run in runs))

    def record(self, run: str, keys) -> None:
        """``keys``: a list in the run's order (``records_of``), or a set (stored sorted)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{run}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(keys if isinstance(keys, list) else sorted(keys)))
        tmp.replace(self.folder / f"{run}.json")  # atomic: a concurrent reader sees all or nothing


class Prewarm:
    """A prewarm under way: planning and compiling in one process pool, driven by a thread of this
    process, so that a check's properties can run meanwhile (``prewarm(..., background=True)``).

    Compiles are queued by the position of the first property that planned them (the order a check
    runs them in), at most one per free pool process, so the keys the run needs soonest compile
    first. A launch that needs a key before it is compiled compiles it on demand, as without a
    prewarm; both write the same binary to the cache, so the race is only wasted work."""

    def __init__(self, work: list, skip: set, jobs: int, manifests, run: str, say, ready=None):
        self.work, self.skip, self.jobs, self.manifests = work, skip, jobs, manifests
        self.run, self.say = run, say
        self.ready = ready or (lambda records: None)
        self.keys, self.seconds, self.troubles, self.errors = set(), {}, [], []
        self.rank: dict = {}  # key -> the position of the first property that plans it
        self.done = 0
        self.started = time.perf_counter()
        self.planned_at = self.ended_at = None
        self._stopped = False
        self._pool = _pool(jobs)
        self._thread = threading.Thread(target=self._drive, name="specfuzz-prewarm", daemon=True)
        self._thread.start()

    def _drive(self) -> None:
        pool, queue, queued, pending_records = self._pool, [], set(), {}
        rank = {args[-1]: i for i, args in enumerate(self.work)}
        pending = {pool.submit(_plan_one, args): "plan" for args in self.work}
        plans_left = len(pending)
        try:
            while pending and not self._stopped:
                finished, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)  # sees a stop soon
                for future in finished:
                    kind = pending.pop(future)
                    if kind == "plan":
                        name, took, planned, trouble = future.result()
                        plans_left -= 1
                        self.seconds[name] = took
                        self.keys.update(planned)
                        for record in planned:
                            self.rank[record] = min(self.rank.get(record, rank[name]), rank[name])
                        if trouble:
                            self.troubles.append(f"{name}: {trouble}")
                        self.ready(sorted(set(planned) & self.skip))  # compiled by an earlier run
                        for record in sorted(set(planned) - self.skip - queued):
                            queued.add(record)
                            heapq.heappush(queue, (rank[name], record))
                        if not plans_left:
                            self.planned_at = time.perf_counter()
                    else:
                        n, errs = future.result()
                        self.done, self.errors = self.done + n, self.errors + errs
                        if n:
                            self.ready([pending_records.pop(future)])
                        else:
                            pending_records.pop(future)
                while queue and len(pending) < self.jobs and not self._stopped:
                    record = heapq.heappop(queue)[1]
                    future = pool.submit(_compile_some, [record])
                    pending[future], pending_records[future] = "compile", record
        except Exception as exc:  # noqa: BLE001 -- a broken pool only costs on-demand compiles
            if not self._stopped:
                self.say(f"prewarm: stopped by {type(exc).__name__}: {exc}")
            self._stopped = True
        self.ended_at = time.perf_counter()
        if not self._stopped:
            self._finish()

    def _finish(self) -> None:
        """Once every planned key is compiled (in the driving thread, so a run sees the line when
        it happens): record the run's manifest and say what was done."""
        if self.manifests is not None:  # keys that failed to warm up compile on demand, here and later
            self.manifests.record(self.run, self.ordered_keys())
        now = self.ended_at
        planned_at = self.planned_at or now
        slowest = ", ".join(f"{n} {s:.1f}s" for n, s in sorted(self.seconds.items(), key=lambda x: -x[1])[:3])
        self.say(f"prewarm: {len(self.keys)} specialisations planned in {planned_at - self.started:.1f}s "
                 f"(slowest: {slowest}), {self.done} of them new, all compiled {now - planned_at:.1f}s after "
                 f"the last plan ({now - self.started:.1f}s in all, {self.jobs} processes)"
                 + (f"; {len(self.errors)} failed (they compile on demand): {self.errors[:3]}"
                    if self.errors else ""))
        for trouble in self.troubles:  # the run will compile what this plan missed
            self.say(f"prewarm: the plan of {trouble}")

    def wait(self) -> int:
        """Wait until every planned key is compiled (the manifest is then recorded) and return how
        many keys the run launches that are now compiled."""
        self._thread.join()
        self._pool.shutdown()
        if self._stopped:
            return 0
        return len(self.keys) - len(self.errors)

    def ordered_keys(self) -> list:
        """The planned keys in the order the run first needs them (``Manifests.records_of``)."""
        return sorted(self.keys, key=lambda record: (self.rank.get(record, len(self.work)), record))

    def finished(self) -> bool:
        return not self._thread.is_alive()

    def stop(self, record: bool = False) -> None:
        """End it now: the run it served is over. Compiles in progress are killed (Triton writes a
        binary to the cache only whole, so a killed one leaves nothing behind). ``record``: the run
        launched every key it planned (it was not cut short), so each is compiled, by this pool or
        on demand, and once every plan is done the run's manifest is recorded as ``wait`` would;
        otherwise none is, and the next run plans again and compiles only what is still missing."""
        if self.finished():
            self.wait()
            return
        self._stopped = True
        self._thread.join(timeout=2)
        for process in list(getattr(self._pool, "_processes", {}).values()):
            process.terminate()
        self._pool.shutdown(wait=False, cancel_futures=True)
        plans = f"{len(self.seconds)} of {len(self.work)} plans done"
        if record and self.planned_at is not None and self.manifests is not None:
            self.manifests.record(self.run, self.ordered_keys())
            plans += ", manifest recorded"
        self.say(f"prewarm: stopped with the run after {time.perf_counter() - self.started:.1f}s, "
                 f"{self.done} keys compiled ({plans})")


def prewarm(profile: str, seed: int, jobs: int | None = None, device: str = "cuda",
            kernel_spec: str = OUR_KERNELS, say=print, max_examples: int | None = None,
            names=None, manifests: Manifests | None | str = "this build", corpus: bool = False,
            background: bool = False, ready=None):
    """Plan and compile a check's keys. Only our kernels are planned. ``manifests``: where compiled
    runs are recorded (default: this build's, in the Triton cache; None: plan and compile every
    time). ``corpus``: also the regression corpus's replay (``pytest -n auto``'s controller:
    tests/harness/test_corpus.py).

    Planning and compiling share one pool and overlap: a property's new keys are queued for
    compiling as soon as its plan is done (one key per task, so the pool stays balanced), while
    the slower properties are still planning.

    Returns the number of keys the run launches that are now compiled; with ``background`` it
    returns at once with a ``Prewarm`` (or None when there is nothing to do) whose ``wait`` or
    ``stop`` the caller must call. ``jobs`` default: one process per CPU, two fewer in the
    background (the run itself needs them). ``ready``, if given, is called with lists of keys whose
    binaries are in the cache, in the order the run first needs them, as soon as that is known: a
    recorded run's at once, else each plan's keys that earlier runs compiled and each key once
    compiled (from the prewarm's thread). ``check`` hands them to its worker to load between calls
    (``load_binary``)."""
    if kernel_spec != OUR_KERNELS:
        say(f"prewarm: skipped (plans only {OUR_KERNELS})")
        return None if background else 0
    if manifests == "this build":
        manifests = Manifests.for_this_build(device)
    spec_key = kernel_spec + (" + corpus" if corpus else "")
    run = Manifests.run_name(profile, seed, max_examples, names, spec_key)
    started = time.perf_counter()
    known = manifests.keys_of(run) if manifests is not None else None
    if known is not None:
        say(f"prewarm: the {len(known)} specialisations of this run are compiled already "
            f"({manifests.folder / run}.json, {time.perf_counter() - started:.1f}s)")
        if ready is not None:
            ready(manifests.records_of(run))
        return None if background else len(known)
    cpus = max(1, os.cpu_count() or 1)
    jobs = (max(1, cpus - 2) if background else cpus) if jobs is None else jobs
    from harness.properties import REGISTRY

    work = [(kernel_spec, profile, max_examples, seed, device, n)
            for n in [*(names or list(REGISTRY)), *([CORPUS] if corpus else [])]]
    skip = manifests.compiled() if manifests is not None else set()
    if jobs == 0:  # in this process, one step after the other (tests)
        ordered, troubles = {}, []  # dict: the keys in the order the run first needs them
        for args in work:
            name, _, planned, trouble = _plan_one(args)
            ordered.update(dict.fromkeys(planned))
            if trouble:
                troubles.append(f"{name}: {trouble}")
        keys = set(ordered)
        done, errors = compile_keys(keys - skip, 0)
        if manifests is not None:
            manifests.record(run, list(ordered))
        if ready is not None and not errors:  # which keys failed is not known here: hand on none then
            ready(list(ordered))
        say(f"prewarm: {len(keys)} specialisations planned, {done} of them new, compiled in this process "
            f"({time.perf_counter() - started:.1f}s in all)")
        for trouble in troubles:
            say(f"prewarm: the plan of {trouble}")
        return None if background else len(keys) - len(errors)
    handle = Prewarm(work, skip, jobs, manifests, run, say, ready)
    return handle if background else handle.wait()


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
