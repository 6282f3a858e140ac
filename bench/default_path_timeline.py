"""Where the default path's time goes (GPU machine): host and GPU timestamps of each step of one call.

Usage: ``PYTHONPATH=. python3 bench/default_path_timeline.py [--shapes 1x8x32000 ...]``.

Each call runs like ``triton.testing.do_bench`` runs it (an L2-clearing memset first, a start event
after it). The driver's steps are wrapped so each records the host clock and a CUDA event when it
returns: the checks, the value summary's launch, the wait for it, every kernel launch. Per
step it prints the median host time since the call began and the median GPU time since the start
event; a GPU gap between two steps that the host times cover means the GPU waited for the host. The
wrappers add ~2 us of host time per step (an event record), so absolute figures are a little high.
Then it prints the uninstrumented event time of the default and no-sync paths for comparison.
It runs with call plans off (``call_plan.ENABLED = False``): the steps it wraps are the full host path's
(a repeated small call would run its plan, kernels/call_plan.py, which has none of them).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time

import torch
import triton.testing

import kernels
import kernels.driver as driver
from bench.bench_kernels import call_args, make_inputs
from kernels import call_plan

STEP_NAMES = ("check_metadata", "launch_variant", "launch_row_stats", "launch_decide", "launch_residual_mass",
              "launch_residual_sample", "launch_small_batch", "bind_small_batch")


class Recorder:
    """Host clock (and, with ``events``, a CUDA event) at each mark of one call."""

    def __init__(self, events: bool = True):
        self.events = events
        self.marks: list[tuple[str, float, torch.cuda.Event | None]] = []

    def mark(self, name: str) -> None:
        event = None
        if self.events:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
        self.marks.append((name, time.perf_counter(), event))

    def named_marks(self):
        """``(step, host time, event)`` with repeated steps numbered (``launch_decide #2``)."""
        seen: dict[str, int] = {}
        for name, t, event in self.marks:
            seen[name] = seen.get(name, 0) + 1
            yield (name if seen[name] == 1 else f"{name} #{seen[name]}"), t, event


@contextlib.contextmanager
def instrumented(recorder: Recorder):
    """The driver's steps wrapped to mark ``recorder`` when each returns; restored on exit."""
    saved = {name: getattr(driver, name) for name in STEP_NAMES}
    pending = driver.PendingCheck

    def wrapped(name, fn):
        def inner(*args, **kwargs):
            out = fn(*args, **kwargs)
            recorder.mark(name)
            if name == "bind_small_batch":  # the one-chunk path binds early and launches after the check
                return wrapped("small-batch launch", out)
            return out
        return inner

    class TimedPendingCheck(pending):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            recorder.mark("summary launched")

        def result(self):
            out = super().result()
            recorder.mark("summary read (after the wait)")
            return out

    for name in STEP_NAMES:
        setattr(driver, name, wrapped(name, saved[name]))
    driver.PendingCheck = TimedPendingCheck
    try:
        yield recorder
    finally:
        for name in STEP_NAMES:
            setattr(driver, name, saved[name])
        driver.PendingCheck = pending


def timeline(call, calls: int) -> None:
    cache = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    rows: dict[str, list[tuple[float, float]]] = {}
    with instrumented(Recorder(events=True)) as rec:
        for i in range(calls + 5):
            cache.zero_()
            rec.marks = []
            t0 = time.perf_counter()
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            rec.mark("returned")
            torch.cuda.synchronize()
            if i >= 5:
                for key, t, event in rec.named_marks():
                    rows.setdefault(key, []).append(((t - t0) * 1e6, start.elapsed_time(event) * 1e3))
    print(f"  {'step':34s} {'host us':>9s} {'gpu us':>9s}")
    for key, values in rows.items():
        host = statistics.median(h for h, _ in values)
        gpu = statistics.median(g for _, g in values)
        print(f"  {key:34s} {host:9.1f} {gpu:9.1f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["1x1x32000", "1x8x32000", "1x1x262144", "1x8x262144",
                                                   "512x8x262144"])
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"])
    p.add_argument("--methods", nargs="+", default=["token", "block"])
    p.add_argument("--calls", type=int, default=40)
    args = p.parse_args(argv)
    call_plan.ENABLED = False
    dtypes = {"bf16": torch.bfloat16, "fp32": torch.float32}
    gen = torch.Generator(device="cuda").manual_seed(0)
    plain = {}
    for shape in args.shapes:  # uninstrumented first
        reqs, k, vocab = map(int, shape.split("x"))
        for dtype in args.dtypes:
            batch = make_inputs(reqs, k, vocab, dtypes[dtype], True, gen)
            batch_args = call_args(batch)
            for method in args.methods:
                run = functools.partial(kernels.rejection_sample, *batch_args, method=method)
                nosync = functools.partial(run, draft_lengths=[k] * reqs)
                run(), nosync()
                plain[(shape, dtype, method)] = [
                    1e3 * triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
                    for fn in (run, nosync)]
    print("default / no-sync path, CUDA events (do_bench, L2 cleared), us")
    for (shape, dtype, method), (default, nosync) in plain.items():
        print(f"  {shape:14s} {dtype:5s} {method:6s} default {default:8.1f}  no-sync {nosync:8.1f}")
    for shape in args.shapes:
        reqs, k, vocab = map(int, shape.split("x"))
        for dtype in args.dtypes:
            batch = make_inputs(reqs, k, vocab, dtypes[dtype], True, gen)
            batch_args = call_args(batch)
            for method in args.methods:
                print(f"{shape} {dtype} {method} (default path, instrumented)")
                timeline(functools.partial(kernels.rejection_sample, *batch_args, method=method), args.calls)


if __name__ == "__main__":
    main()
