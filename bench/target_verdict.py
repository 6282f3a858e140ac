"""Issue 3's bandwidth target, shape by shape: our time against the 70 % budget and the floors.

Usage (GPU machine): ``PYTHONPATH=. python3 bench/target_verdict.py [--requests 128 512] [--methods ...]
[--drafts ...] [--draft-data uniform|close|every-mass] [--greedy SHARE] [--json F]``.
For every shape of issue 3's grid with >= 128 requests (requests x k {1, 4, 8} x V {32000, 128256,
151936, 262144} x bf16 / fp32 x token / block x draft logits / point drafts) it runs
``bench_kernels.bench_one`` (default path, no-sync path, graph replay, eager ratio) and times three
floors on the same bytes (``bench/floors.py`` has the kernels):

- ``read``: one read of every row the method must read (token: target and draft rows once; block
  with draft logits also its second pass: target rows ``0..k-1`` and draft rows again), keeping only
  a block max: less work than any pass 1 can do;
- ``noise``: the race's noise of one row per request (the contract keys it by vocabulary index);
- ``both``: ``read`` and ``noise`` at once with no dependency between them, the better of two
  streams and one interleaved launch: what an ideal design that hides each under the other could
  reach on this device with Triton's Philox;
- ``philox``: the Philox words of the raced rows alone (``floors.philox_us``): the part of
  ``noise`` no implementation can skip (``log2 E`` of every entry can be: the pruned race bounds
  most entries with ``log2 u``). The summary counts the shapes over budget on ``max(read, philox)``
  (impossible even if a design hid everything else) and on ``read + philox``.

The budget is the bytes over 70 % of the measured copy bandwidth. Each shape gets one verdict for
the no-sync path (host ``draft_lengths``: what issue 3's chunking section asks callers to pass) and
one for the default path (value check and its wait included):

- ``met``: >= 70 %;
- ``impossible``: ``both`` alone exceeds the budget, so no implementation of the contract meets it;
- ``after-reads``: ``read + noise`` exceeds the budget, so a design that samples after its reads
  cannot meet it (ours samples after the reads: the race's weights need the row statistics);
- ``missed``: the floors leave room and we do not reach 70 %.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json

import torch
import triton
import triton.language as tl
import triton.testing

from bench import floors
from bench.bench_kernels import DRAFT_DATA, bench_one, copy_bandwidth
from bench.bench_kernels import parse_args as bench_args
from kernels.randomness import SAMPLE_STREAM, log2_exponential_from_uniform, sampling_uniforms_block

READ_BLOCK, NOISE_BLOCK = 8192, floors.BLOCK


@triton.jit
def _both_floor_kernel(x_ptr, read_out_ptr, seeds_ptr, noise_out_ptr, stride, vocab_size, read_blocks,
                       num_read, num_noise, noise_blocks, READ_BLOCK: tl.constexpr,
                       NOISE_BLOCK: tl.constexpr):
    """Programs interleave the two roles in proportion: program ``p`` is noise program
    ``floor(p * N / T)`` when that count steps at ``p``, else read program ``p - floor(p * N / T)``."""
    p = tl.program_id(0).to(tl.int64)
    total = num_read + num_noise
    before = p * num_noise // total
    if (p + 1) * num_noise // total > before:
        req, vb = before // noise_blocks, before % noise_blocks
        seed = tl.load(seeds_ptr + req)
        log_e = log2_exponential_from_uniform(
            sampling_uniforms_block(seed, vb * NOISE_BLOCK, req * 1000, SAMPLE_STREAM, NOISE_BLOCK))
        best, index = tl.max(-log_e, axis=0, return_indices=True, return_indices_tie_break_left=True)
        tl.store(noise_out_ptr + before, best + index.to(tl.float32) * 0.0)
    else:
        r = p - before
        row, vb = r // read_blocks, r % read_blocks
        cols = vb * READ_BLOCK + tl.arange(0, READ_BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < vocab_size, other=float("-inf"),
                    eviction_policy="evict_first")
        tl.store(read_out_ptr + r, tl.max(x.to(tl.float32), axis=0))


def median_us(fn) -> float:
    fn()
    return 1e3 * triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def floor_times(rows, reqs, vocab, dtype, pool):
    """``(read, noise, both)`` in us for ``rows`` logit rows of ``vocab`` and ``reqs`` raced rows."""
    x = pool[: rows * vocab * dtype.itemsize].view(dtype).view(rows, vocab)
    seeds = torch.arange(reqs, device="cuda", dtype=torch.int64)
    read_blocks, noise_blocks = triton.cdiv(vocab, READ_BLOCK), triton.cdiv(vocab, NOISE_BLOCK)
    read_out = torch.empty(rows * read_blocks, device="cuda")
    noise_out = torch.empty(reqs * noise_blocks, device="cuda")

    def read():
        floors._read_floor_kernel[(rows, read_blocks)](x, read_out, x.stride(0), vocab, read_blocks,
                                                       BLOCK=READ_BLOCK, num_warps=8)

    def noise():
        floors._noise_floor_kernel[(reqs, noise_blocks)](seeds, noise_out, noise_blocks, BLOCK=NOISE_BLOCK,
                                                         num_warps=8)

    streams = (torch.cuda.Stream(), torch.cuda.Stream())

    def two_streams():
        here = torch.cuda.current_stream()
        for stream, part in zip(streams, (read, noise), strict=True):
            stream.wait_stream(here)
            with torch.cuda.stream(stream):
                part()
        for stream in streams:
            here.wait_stream(stream)

    num_read, num_noise = rows * read_blocks, reqs * noise_blocks

    def one_launch():
        _both_floor_kernel[(num_read + num_noise,)](
            x, read_out, seeds, noise_out, x.stride(0), vocab, read_blocks, num_read, num_noise, noise_blocks,
            READ_BLOCK=READ_BLOCK, NOISE_BLOCK=NOISE_BLOCK, num_warps=8)

    return (median_us(read), median_us(noise), min(median_us(two_streams), median_us(one_launch)),
            floors.philox_us(reqs, vocab))


def verdict(pct, read, noise, both, budget) -> str:
    if pct >= 70.0:
        return "met"
    if both > budget:
        return "impossible"
    if read + noise > budget:
        return "after-reads"
    return "missed"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, nargs="+", default=[128, 512])
    p.add_argument("--draft-lens", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--vocabs", type=int, nargs="+", default=[32000, 128256, 151936, 262144])
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"])
    p.add_argument("--rep", type=int, default=20, help="do_bench rep (ms) of our calls")
    p.add_argument("--no-eager", action="store_true")
    p.add_argument("--methods", nargs="+", default=["token", "block"], choices=["token", "block"])
    p.add_argument("--drafts", nargs="+", default=["logits", "point"], choices=["logits", "point"])
    p.add_argument("--draft-data", default="uniform", choices=DRAFT_DATA,
                   help="bench_kernels.make_inputs: how the drafts relate to the target")
    p.add_argument("--greedy", type=float, default=0.0,
                   help="share of greedy requests (bench_kernels.make_inputs; their rows race nothing, "
                        "so the floors overstate what they need)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    bench = bench_args(["--rep", str(args.rep), "--skip-memory", "--draft-data", args.draft_data,
                        "--greedy", str(args.greedy)]
                       + (["--no-eager"] if args.no_eager else []))
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    copy_bw = copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e9:.0f} GB/s; draft data {args.draft_data}; "
          f"greedy share {args.greedy}", flush=True)
    largest = max(args.requests) * (4 * max(args.draft_lens) + 1) * max(args.vocabs) * 4
    pool = torch.empty(largest, dtype=torch.uint8, device="cuda")  # floors read it; values do not matter
    gen = torch.Generator(device="cuda").manual_seed(0)
    dtypes = {"bf16": torch.bfloat16, "fp32": torch.float32}
    cache, rows = {}, []
    header = ("reqs  k       V dtype method draft    budget   read  noise   both philox     us  nosync  graph"
              "  %nosync %default x_eager  verdict(nosync/default)")
    grid = itertools.product(args.requests, args.draft_lens, args.vocabs, args.dtypes)
    for reqs, k, vocab, dtype_name in grid:
        for method, draft in itertools.product(args.methods, args.drafts):
            row = bench_one(bench, reqs, k, vocab, dtype_name, method, draft, copy_bw, gen)
            if not rows:
                print(header, flush=True)
            dtype = dtypes[dtype_name]
            read_rows = floors.read_rows(reqs, k, method, draft)
            key = (read_rows, reqs, vocab, dtype_name)
            if key not in cache:
                cache[key] = floor_times(read_rows, reqs, vocab, dtype, pool)
            read, noise, both, philox = cache[key]
            budget = read_rows * vocab * dtype.itemsize / (0.7 * copy_bw) * 1e6
            pct = row["pct_alg"]  # default path; token: pct_alg == pct1
            pct_nosync = pct * row["us"] / row["us_nosync"]
            row.update(data=args.draft_data, greedy=args.greedy, budget=budget, read=read, noise=noise,
                       both=both, philox=philox, pct_nosync=pct_nosync,
                       verdict_nosync=verdict(pct_nosync, read, noise, both, budget),
                       verdict_default=verdict(pct, read, noise, both, budget))
            rows.append(row)
            print(f"{reqs:4d} {k:2d} {vocab:7d} {dtype_name:5s} {method:6s} {draft:6s} {budget:8.1f} "
                  f"{read:6.1f} {noise:6.1f} {both:6.1f} {philox:6.1f} {row['us']:7.1f} "
                  f"{row['us_nosync']:7.1f} {row['us_graph']:6.1f} "
                  f"{pct_nosync:8.1f} {pct:8.1f} {row['eager']:7.1f}  {row['verdict_nosync']}/"
                  f"{row['verdict_default']}", flush=True)
            torch.cuda.empty_cache()
    print("\nverdicts (no-sync path):", dict(collections.Counter(r["verdict_nosync"] for r in rows)))
    print("verdicts (default path):", dict(collections.Counter(r["verdict_default"] for r in rows)))
    print("over budget on the Philox floor: max(read, philox)",
          sum(max(r["read"], r["philox"]) > r["budget"] for r in rows), "of", len(rows), "; read + philox",
          sum(r["read"] + r["philox"] > r["budget"] for r in rows))
    for r in rows:
        if r["verdict_nosync"] == "missed":
            print(f"  missed with room: {r['reqs']}x{r['k']}x{r['vocab']} {r['dtype']} {r['method']} "
                  f"{r['draft']}: {r['pct_nosync']:.1f} % ({r['us_nosync']:.1f} us, "
                  f"budget {r['budget']:.1f}, read + noise {r['read'] + r['noise']:.1f})")
    eager = [r["eager"] for r in rows if r["eager"] == r["eager"]]
    if eager:
        print(f"eager ratio: min {min(eager):.1f} (>= 10x: {sum(e >= 10 for e in eager)}/{len(eager)})")
    print(f"graph replay == direct call: {sum(r['graph_ok'] for r in rows)}/{len(rows)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(copy_bw=copy_bw, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
