"""Lower bounds that the randomness contract and the bytes put on a verification call (GPU machine).

Usage: ``PYTHONPATH=. python3 bench/floors.py``. Three kernels that each do only part of what any
implementation of DESIGN.md's contract must do, timed with CUDA events (``triton.testing.do_bench``):

- ``read``: one read of every logit row of the call (a block max per program, nothing else);
- ``noise``: the race's noise alone, one Philox uniform and ``log2 E`` per vocabulary entry of one
  row per request (the contract keys the sampling noise by vocabulary index, so every entry of the
  raced row needs one), and the block argmax; it reads no logits;
- ``philox``: the Philox words alone, of every vocabulary entry of one row per request, reduced by
  an integer min: no uniform, no logarithm. A race need not take ``log2 E`` of every entry (the
  pruned race bounds most of them with ``log2 u``, kernels/residual_sample.py), but no
  implementation of the contract can skip the words themselves;
- ``wait``: the host side of a value check, one tiny launch and a stream synchronisation, back to
  back (the default path checks values before any verification launch).

For each shape with >= 128 requests it prints the 70 %-of-copy-bandwidth budget of issue 3 and the
floors: ``read + noise`` for a design that races after the reads (ours), and ``max(read, noise)``
for an ideal one that hides one under the other completely. ``shape_floors`` gives the same floors
for any shape of the benchmarks' grid (``bench/vs_vllm.py`` divides times by them).
"""

from __future__ import annotations

import functools
import statistics
import time

import torch
import triton
import triton.language as tl
import triton.testing

from bench.bench_kernels import copy_bandwidth
from kernels.randomness import (
    SAMPLE_STREAM,
    log2_exponential_from_uniform,
    philox_words,
    sampling_uniforms_block,
)

BLOCK = 4096


@triton.jit
def _read_floor_kernel(x_ptr, out_ptr, stride, vocab_size, num_blocks, BLOCK: tl.constexpr):
    row, vb = tl.program_id(0), tl.program_id(1)
    cols = vb * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * stride + cols, mask=cols < vocab_size, other=float("-inf"),
                eviction_policy="evict_first")
    tl.store(out_ptr + row * num_blocks + vb, tl.max(x.to(tl.float32), axis=0))


@triton.jit
def _noise_floor_kernel(seeds_ptr, out_ptr, num_blocks, BLOCK: tl.constexpr):
    req, vb = tl.program_id(0), tl.program_id(1)
    seed = tl.load(seeds_ptr + req)
    position = req.to(tl.int64) * 1000
    log_e = log2_exponential_from_uniform(sampling_uniforms_block(seed, vb * BLOCK, position, SAMPLE_STREAM,
                                                                  BLOCK))
    best, index = tl.max(-log_e, axis=0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(out_ptr + req * num_blocks + vb, best + index.to(tl.float32) * 0.0)


@triton.jit
def _philox_floor_kernel(seeds_ptr, out_ptr, num_blocks, BLOCK: tl.constexpr):
    req, vb = tl.program_id(0), tl.program_id(1)
    seed = tl.load(seeds_ptr + req)
    position = req.to(tl.int64) * 1000
    quads = vb * (BLOCK // 4) + tl.arange(0, BLOCK // 4)
    w0, w1, w2, w3 = philox_words(seed, quads, position, SAMPLE_STREAM)
    low = tl.minimum(tl.minimum(w0, w1), tl.minimum(w2, w3))
    tl.store(out_ptr + req * num_blocks + vb, tl.min(low, axis=0).to(tl.float32))


def read_us(rows, vocab, dtype):
    x = torch.randn(rows, vocab, device="cuda").to(dtype)
    nb = triton.cdiv(vocab, 8192)
    out = torch.empty(rows * nb, device="cuda")
    run = lambda: _read_floor_kernel[(rows, nb)](x, out, x.stride(0), vocab, nb, BLOCK=8192, num_warps=8)
    run()
    return 1e3 * triton.testing.do_bench(run, warmup=10, rep=50, return_mode="median")


def _raced_rows_us(kernel, reqs, vocab):
    """Median time of ``kernel`` over one row of ``vocab`` entries per request (no logits read)."""
    seeds = torch.arange(reqs, device="cuda", dtype=torch.int64)
    nb = triton.cdiv(vocab, BLOCK)
    out = torch.empty(reqs * nb, device="cuda")
    run = lambda: kernel[(reqs, nb)](seeds, out, nb, BLOCK=BLOCK, num_warps=8)
    run()
    return 1e3 * triton.testing.do_bench(run, warmup=10, rep=50, return_mode="median")


def noise_us(reqs, vocab):
    return _raced_rows_us(_noise_floor_kernel, reqs, vocab)


def philox_us(reqs, vocab):
    return _raced_rows_us(_philox_floor_kernel, reqs, vocab)


def read_rows(reqs: int, k: int, method: str, draft: str) -> int:
    """Logit rows a call with ``reqs`` requests of ``k`` drafts must read: target and draft rows once
    (``draft``: ``"logits"`` or ``"point"``), and for block verification with draft logits its second
    pass over target rows ``0..k-1`` and the draft rows again."""
    rows = reqs * (k + 1) + (reqs * k if draft == "logits" else 0)
    return rows + (2 * reqs * k if (method, draft) == ("block", "logits") else 0)


@functools.cache
def _read_us_cached(rows: int, vocab: int, dtype: torch.dtype) -> float:
    return read_us(rows, vocab, dtype)


@functools.cache
def _noise_us_cached(reqs: int, vocab: int) -> float:
    return noise_us(reqs, vocab)


def shape_floors(reqs: int, k: int, vocab: int, dtype: torch.dtype, method: str, draft: str) -> dict:
    """The floors of one shape in us (each part timed once per process, then reused): ``read`` of
    ``read_rows`` rows, ``noise`` of one raced row per request, ``after_reads`` = read + noise (a
    design that races after its reads, ours) and ``ideal`` = max(read, noise)."""
    read = _read_us_cached(read_rows(reqs, k, method, draft), vocab, dtype)
    noise = _noise_us_cached(reqs, vocab)
    return dict(read=read, noise=noise, after_reads=read + noise, ideal=max(read, noise))


def wait_us(calls=300):
    x = torch.zeros(1, device="cuda")
    stream = torch.cuda.current_stream()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        x.add_(1)
        stream.synchronize()
        times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times)


def main():
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s; host launch + synchronize {wait_us():.1f} us (median)")
    print(" reqs  k       V dtype  budget70   read  noise  read+noise  max(read,noise)  verdict(read+noise)")
    for reqs in (128, 512):
        for k in (1, 8):
            for vocab in (32000, 262144):
                for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
                    rows = read_rows(reqs, k, "token", "logits")
                    budget = rows * vocab * dtype.itemsize / (0.7 * bw) * 1e6
                    parts = shape_floors(reqs, k, vocab, dtype, "token", "logits")
                    r, n = parts["read"], parts["noise"]
                    verdict = "over" if r + n > budget else "within"
                    print(f"{reqs:5d} {k:2d} {vocab:7d} {name:5s} {budget:9.1f} {r:6.1f} {n:6.1f} "
                          f"{r + n:11.1f} {max(r, n):16.1f}  {verdict}", flush=True)
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
