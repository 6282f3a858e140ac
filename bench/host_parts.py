"""Host cost of each part of one verification call (GPU machine; prints one line per part).

Usage: ``PYTHONPATH=. python3 bench/host_parts.py``. Times are per call, averaged over 300 calls with
the GPU otherwise idle (a 1 x 8 x 32000 bf16 batch): the argument checks, the value check (launch +
device-to-host copy), allocations, one launch through Triton, through ``FastLaunch`` and through the
compiled launcher alone, and whole calls with and without ``FastLaunch``.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time

import numpy as np
import torch

import kernels
from bench.bench_kernels import host_time_us, make_inputs
from kernels import chunking, driver, launch, row_stats, validation
from kernels.launch import current_raw_stream

ARG_NAMES = ("target_logits", "draft_logits", "draft_token_ids", "cu_num_draft_tokens", "temperature",
             "seeds", "positions")


def per_call_us(fn, calls: int = 300) -> float:
    for _ in range(20):  # warm: compiled variants, kept workspace
        fn()
    return host_time_us(fn, calls)


def table_launch(args, ws):
    row_stats._row_table_kernel[(1,)](args[3], args[4], ws.row_scale, ws.row_req, ws.done, 9, BLOCK=16)


def compiled_table_launch(compiled, constexprs, args, ws):
    compiled.run(1, 1, 1, current_raw_stream(0), compiled.function, compiled.packed_metadata,
                 None, None, None, args[3], args[4], ws.row_scale, ws.row_req, ws.done, 9, *constexprs)


def main():
    gen = torch.Generator(device="cuda").manual_seed(0)
    batch = make_inputs(1, 8, 32000, torch.bfloat16, True, gen)
    args = [batch[name] for name in ARG_NAMES]
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


_MARKS: list = []


def _marked(name, fn):
    def inner(*a, **k):
        out = fn(*a, **k)
        _MARKS.append((name, time.perf_counter()))
        return out
    return inner


def steps(call, calls: int = 300) -> None:
    """Host clock after each driver step (checks, summary, sync, launches), without CUDA events."""
    saved = {name: getattr(driver, name) for name in STEP_NAMES}
    for name in STEP_NAMES:
        setattr(driver, name, _marked(name, saved[name]))
    pending = driver.PendingCheck
    driver.PendingCheck = type("MarkedCheck", (pending,), {
        "__init__": lambda self, *a, **k: (pending.__init__(self, *a, **k),
                                           _MARKS.append(("summary queued", time.perf_counter())))[0],
        "result": lambda self: (pending.result(self), _MARKS.append(("synced", time.perf_counter())))[0],
    })
    rows: dict[str, list[float]] = {}
    try:
        for i in range(calls + 20):
            _MARKS.clear()
            start = time.perf_counter()
            call()
            _MARKS.append(("returned", time.perf_counter()))
            if i >= 20:
                seen: dict[str, int] = {}
                for name, t in _MARKS:
                    seen[name] = seen.get(name, 0) + 1
                    rows.setdefault(name if seen[name] == 1 else f"{name} #{seen[name]}", []).append(
                        (t - start) * 1e6)
        torch.cuda.synchronize()
    finally:
        for name in STEP_NAMES:
            setattr(driver, name, saved[name])
        driver.PendingCheck = pending
    for name, values in rows.items():
        print(f"  {name:28s} {statistics.median(values):7.1f}")


STEP_NAMES = ("check_metadata", "launch_variant", "launch_row_stats", "launch_decide", "launch_residual_mass",
              "launch_residual_sample")


if __name__ == "__main__":
    main()
