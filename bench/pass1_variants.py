"""What limits pass 1 (the statistics read)? Variants timed on 512 x 8 x 262144 rows (GPU machine).

Usage: ``PYTHONPATH=. python3 bench/pass1_variants.py``. Prints, per dtype, the median time (us) of
our ``_row_stats_kernel`` and of copies of it: the previous version (``tl.argmax``, plain loads),
with/without ``evict_first``, the greedy argmax as max+min, no argmax code at all, and max only (a
read-bandwidth ceiling for this access pattern). Rows are all sampled (no greedy row). The copies
predate pass 1's tail sum (``blk_tail``): they store the plain block sum.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
import triton.testing

from kernels import row_stats

LOG2E = tl.constexpr(1.4426950408889634)
NEG_INF = tl.constexpr(float("-inf"))
VARIANTS = (("previous", 1, False, False), ("prev+evict", 1, True, False),
            ("minmax", 2, False, False), ("minmax+evict", 2, True, False),
            ("no-argmax+evict", 0, True, False), ("max-only", 0, False, True))


@triton.jit
def stats_variant(target_ptr, draft_ptr, target_stride, draft_stride, row_scale_ptr, blk_max_ptr, blk_sum_ptr,
                  blk_arg_ptr, num_target_rows, vocab_size, num_vblocks, BLOCK_V: tl.constexpr,
                  ARGMAX: tl.constexpr, EVICT: tl.constexpr, MAX_ONLY: tl.constexpr):
    """ARGMAX 0: none, 1: tl.argmax (the previous kernel), 2: max + min (the current one)."""
    row = tl.program_id(0)
    vblock = tl.program_id(1)
    row_ptr = row_stats.stacked_row(target_ptr, draft_ptr, target_stride, draft_stride, row, num_target_rows)
    cols = vblock * BLOCK_V + tl.arange(0, BLOCK_V)
    if EVICT:
        x = tl.load(row_ptr + cols, mask=cols < vocab_size, other=NEG_INF, eviction_policy="evict_first")
    else:
        x = tl.load(row_ptr + cols, mask=cols < vocab_size, other=NEG_INF)
    x = x.to(tl.float32)
    scale = tl.load(row_scale_ptr + row)
    greedy = scale < 0
    exp2_scale = tl.where(greedy, 1.0, scale) * LOG2E
    block_max = tl.max(x, axis=0)
    out = row * num_vblocks + vblock
    tl.store(blk_max_ptr + out, block_max)
    if not MAX_ONLY:
        block_sum = tl.sum(tl.exp2((x - block_max) * exp2_scale), axis=0)
        tl.store(blk_sum_ptr + out, tl.where(block_max == NEG_INF, 0.0, block_sum))
    if ARGMAX == 1:
        if greedy:
            x = tl.where(x == x, x, NEG_INF)
            tl.store(blk_arg_ptr + out, tl.argmax(x, axis=0, tie_break_left=True) + vblock * BLOCK_V)
    if ARGMAX == 2:
        if greedy:
            finite = tl.where(x == x, x, NEG_INF)
            best = tl.max(finite, axis=0)
            tl.store(blk_arg_ptr + out, tl.min(tl.where(finite == best, cols, vocab_size + BLOCK_V), axis=0))


def median_us(fn) -> float:
    return triton.testing.do_bench(fn, rep=60, return_mode="median") * 1e3


def main(vocab=262144, reqs=512, k=8, block=8192, warps=8):
    for dtype in (torch.bfloat16, torch.float32):
        t = torch.randn(reqs * (k + 1), vocab, device="cuda").to(dtype)
        d = torch.randn(reqs * k, vocab, device="cuda").to(dtype)
        rows, nvb = t.shape[0] + d.shape[0], triton.cdiv(vocab, block)
        gigabytes = (t.numel() + d.numel()) * t.element_size() / 1e9
        scale = torch.ones(rows, device="cuda")
        bm, bs = torch.empty(rows * nvb, device="cuda"), torch.empty(rows * nvb, device="cuda")
        ba = torch.empty(rows * nvb, dtype=torch.int32, device="cuda")
        common = (t, d, t.stride(0), d.stride(0), scale, bm, bs, ba, t.shape[0], vocab, nvb)
        current = functools.partial(row_stats._row_stats_kernel.fn[(rows, nvb)], *common, BLOCK_V=block,
                                    PDL=False, num_warps=warps)
        now = median_us(current)
        cells = [f"current {now:7.1f}"]
        for name, argmax, evict, max_only in VARIANTS:
            fn = functools.partial(stats_variant[(rows, nvb)], *common, BLOCK_V=block, ARGMAX=argmax,
                                   EVICT=evict, MAX_ONLY=max_only, num_warps=warps)
            cells.append(f"{name} {median_us(fn):7.1f}")
        rate = f"  (us; current = {gigabytes / now * 1e3:.2f} TB/s)"
        print(f"{str(dtype):15s} {block}/{warps}: " + ", ".join(cells) + rate, flush=True)
        del t, d
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
