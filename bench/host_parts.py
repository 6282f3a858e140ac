"""Host cost of each part of one verification call (GPU machine; prints one line per part).

Usage: ``PYTHONPATH=. python3 bench/host_parts.py``. Times are per call, averaged over 300 calls with
the GPU otherwise idle (a 1 x 8 x 32000 bf16 batch): the argument checks, the value check (launch +
device-to-host copy), allocations, one launch through Triton, through ``FastLaunch`` and through the
compiled launcher alone, and whole calls with and without ``FastLaunch``. Whole calls repeat one
layout, so they run its call plan (kernels/call_plan.py) unless ``call_plan.ENABLED`` is False; the parts
are the full host path's. Not run on a GPU since call plans exist.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time

import numpy as np
import torch

import kernels
from bench.bench_kernels import call_args, host_time_us, make_inputs
from bench.default_path_timeline import Recorder, instrumented
from kernels import chunking, driver, launch, row_stats, validation
from kernels.launch import current_raw_stream


def per_call_us(fn, calls: int = 300) -> float:
    for _ in range(20):  # warm: compiled variants, kept workspace
        fn()
    return host_time_us(fn, calls)


def table_launch(args, ws):
    row_stats._row_table_kernel[(1,)](args[3], args[4], ws.row_scale, ws.row_req, ws.done, ws.sync, 9,
                                      BLOCK=16, PDL=False, DELAY_NS=0)


def compiled_table_launch(compiled, constexprs, args, ws):
    compiled.run(1, 1, 1, current_raw_stream(0), compiled.function, compiled.packed_metadata,
                 None, None, None, args[3], args[4], ws.row_scale, ws.row_req, ws.done, ws.sync, 9,
                 *constexprs)


def main():
    gen = torch.Generator(device="cuda").manual_seed(0)
    batch = make_inputs(1, 8, 32000, torch.bfloat16, True, gen)
    args = call_args(batch)
    dev = args[0].device
    print("python", sys.version.split()[0], "torch", torch.__version__)
    parts = {
        "check_metadata": functools.partial(validation.check_metadata, *args, "token", 1 << 30, False, [8]),
        "check_values (scalars, pinned)": functools.partial(validation.check_values, *args[2:5], 32000,
                                                            want_lengths=False),
        "check_values (with lengths)": functools.partial(validation.check_values, *args[2:5], 32000),
        "torch.empty": functools.partial(torch.empty, 9, dtype=torch.int64, device=dev),
        "Workspace.allocate": functools.partial(chunking.Workspace.allocate, 9, 8, 1, 4, 8, dev),
        "plan_for_budget": functools.partial(chunking.plan_for_budget, np.array([8]), 4, 8, 1 << 30),
        "torch.cuda.current_stream(dev)": functools.partial(torch.cuda.current_stream, dev),
        "raw current stream": functools.partial(current_raw_stream, 0),
        "is_current_stream_capturing": torch.cuda.is_current_stream_capturing,
        "launch_variant": functools.partial(driver.launch_variant, *args[:3], args[3], args[5], args[6]),
        "reusable_workspace": functools.partial(chunking.reusable_workspace, (9, 8, 1, 4, 8), dev),
    }
    for name, fn in parts.items():
        print(f"{name:32s} {per_call_us(fn):7.1f} us")
    ws = chunking.Workspace.allocate(9, 8, 1, 4, 8, dev)
    launch.ENABLED = False
    print(f"{'one launch (Triton)':32s} {per_call_us(functools.partial(table_launch, args, ws)):7.1f} us")
    launch.ENABLED = True
    print(f"{'one launch (FastLaunch)':32s} {per_call_us(functools.partial(table_launch, args, ws)):7.1f} us")
    compiled, constexprs, _ = next(iter(row_stats._row_table_kernel.cache.values()))
    direct = functools.partial(compiled_table_launch, compiled, constexprs, args, ws)
    print(f"{'one launch (compiled.run)':32s} {per_call_us(direct):7.1f} us")
    for fast in (False, True):
        launch.ENABLED = fast
        for method in ("token", "block"):
            nosync = functools.partial(kernels.rejection_sample, *args, method=method, draft_lengths=[8])
            default = functools.partial(kernels.rejection_sample, *args, method=method)
            print(f"whole {method} call, FastLaunch={fast}: no-sync {per_call_us(nosync):7.1f} us, "
                  f"default {per_call_us(default):7.1f} us")
    for method in ("token", "block"):
        for lengths in (None, [8]):
            print(f"steps of one {method} call, {'default' if lengths is None else 'no-sync'} path "
                  "(host us since the call began, median of 300)")
            steps(functools.partial(kernels.rejection_sample, *args, method=method, draft_lengths=lengths))


def steps(call, calls: int = 300) -> None:
    """Host clock after each driver step (checks, summary, wait, launches), without CUDA events."""
    rows: dict[str, list[float]] = {}
    with instrumented(Recorder(events=False)) as rec:
        for i in range(calls + 20):
            rec.marks = []
            start = time.perf_counter()
            call()
            rec.mark("returned")
            if i >= 20:
                for name, t, _ in rec.named_marks():
                    rows.setdefault(name, []).append((t - start) * 1e6)
        torch.cuda.synchronize()
    for name, values in rows.items():
        print(f"  {name:28s} {statistics.median(values):7.1f}")


if __name__ == "__main__":
    main()
