"""Launch parameters of a verification chunk: block sizes, warps, register caps, size thresholds, geometry.

Every value here is a measured default (the figures are in docs/kernels-log.md); none is read from
the environment. Results do not depend on block sizes or warps beyond float32 ties (randomness is
keyed by vocabulary index, never by block), and not at all on the thresholds, which pick between
paths with the same results bit for bit. Tests and benchmarks that must force a path or sweep a
value set these module attributes (``monkeypatch.setattr``) and then drop what was derived from the
old values: ``geometry.cache_clear()`` and ``kernels.release_workspaces()`` (call plans keep their
launches).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import kernels._device
import triton

# Vocabulary blocks of the statistics and residual-mass passes, and the largest block of the sampling
# race (halved down to 512 when few requests: ``race_block_size``); small under the interpreter so
# that tests span several blocks.
BLOCK_V = 256 if kernels._device.INTERPRETING else 8192
RACE_BLOCK_V = 256 if kernels._device.INTERPRETING else 4096
STATS_WARPS = 8
RACE_WARPS = 8

# The race kernel's default register caps: uncapped, the bf16 race with draft logits took 108 registers
# offline (sm_90, triton 3.9). Capped at 64, race blocks of >= 1024 lanes compile without spills and
# four 8-warp programs fit on an SM; 512-lane blocks spill at 64, so they get 80 (``race_register_cap``).
# H200, 512 x {1, 8} x 262144 race + emit, cap 64 against none: 337 / 354, 371 / 385 us (bf16),
# 336 / 362, 380 / 410 (fp32) (docs/kernels-log.md, v13).
RACE_MAXNREG = 64
RACE_MAXNREG_SMALL_BLOCK = 80
# A pruned race program (4096 lanes) runs 4 warps, 32 lanes a thread, capped at 72 registers: H200,
# race launch at 512 x 1 x 262144, 8 warps / 64 registers -> 4 / 72: bf16 255.7 -> 202.6 us (point
# drafts), 298.0 -> 245.0 (draft logits); fp32 264.9 -> 218.0, 305.2 -> 257.9. 16 or 64 lanes a
# thread were slower, and so were caps of 96 and 128 (docs/kernels-log.md, v22).
PRUNED_RACE_WARPS = 4
PRUNED_RACE_MAXNREG = 72

# The race of a chunk with at least this many raced entries (requests x V) is pruned: each block
# computes bounds of its scores, and the request's last block races only the blocks the bounds cannot
# rule out (residual_sample.race_block_program). The race is bound by its Philox integer work, which
# the bounds keep, so pruning saves only the floating-point part: on the H200 (docs/kernels-log.md,
# v21) the race took 0.88-0.95x the time at 512 x 262144 and 0.93-0.99x at 128 x 262144, but
# 1.03-1.12x at 512 x 32000, where the last block's serial races weigh more. With its own warps and
# cap (v22) the pruned race took 0.71-0.78x at 512 x 262144 and 0.84-0.93x at 128 x 262144; below
# the threshold it has not been re-measured. Decided per chunk, from the chunk's requests. Under the
# interpreter every race is pruned, so that the CPU tests run the pruned path.
RACE_PRUNE_MIN_ENTRIES = 0 if kernels._device.INTERPRETING else 1 << 25

# Chunks of at most this many requests run the decide stages inside the passes before them
# (kernels/fused_decide.py): one launch fewer, one program deciding every request in turn.
FUSE_DECIDE_MAX_REQS = 4


def fit_block(block: int, vocab_size: int) -> int:
    """``block`` shrunk to the vocabulary (a power of two >= 16): small-V batches, such as the
    statistical layer's replicated requests, would otherwise run mostly masked lanes."""
    return min(block, max(16, 1 << max(0, vocab_size - 1).bit_length()))


def warps_for(block: int, cap: int) -> int:
    """At most ``cap`` warps, and no more than one per 256 lanes of the block."""
    return max(1, min(cap, block // 256))


def stats_warps(block: int = 1 << 30) -> int:
    return warps_for(block, STATS_WARPS)


def race_warps(block: int = 1 << 30, prune: bool = False) -> int:
    """Warps of a race program: ``RACE_WARPS``, or ``PRUNED_RACE_WARPS`` for a pruned race."""
    return warps_for(block, PRUNED_RACE_WARPS if prune else RACE_WARPS)


def race_register_cap(block: int, prune: bool = False) -> dict:
    """Triton's launch option capping the race kernel's registers: ``PRUNED_RACE_MAXNREG`` for a pruned
    race, ``RACE_MAXNREG`` for race blocks of >= 1024 lanes and ``RACE_MAXNREG_SMALL_BLOCK`` below."""
    if prune:
        return {"maxnreg": PRUNED_RACE_MAXNREG}
    return {"maxnreg": RACE_MAXNREG if block >= 1024 else RACE_MAXNREG_SMALL_BLOCK}


def race_prune(raced_entries: int) -> bool:
    """Whether a chunk's race is pruned: from ``RACE_PRUNE_MIN_ENTRIES`` raced entries on. Only the
    race launch prunes; the single launch of small chunks never does."""
    return raced_entries >= RACE_PRUNE_MIN_ENTRIES


def race_block_size(num_reqs: int, vocab_size: int, block_v: int) -> int:
    """Split one row over more programs when few rows are sampled (aim: >= ~2 programs per SM)."""
    block = block_v
    while block > 512 and num_reqs * triton.cdiv(vocab_size, block) < 256:
        block //= 2
    return block


class Geometry(NamedTuple):
    """Launch parameters that depend only on the vocabulary, the request count and the output width."""

    block_v: int
    num_vblocks: int
    race_block: int
    race_blocks: int
    nvb_pow2: int
    race_pow2: int
    rows_pow2: int


@functools.lru_cache(maxsize=512)
def geometry(vocab_size: int, num_reqs: int, width: int, block_size: int | None = None) -> Geometry:
    """The geometry of a chunk, cached per layout (``block_size``: both block sizes, for tests)."""
    block_v = block_size or fit_block(BLOCK_V, vocab_size)
    race_block = race_block_size(num_reqs, vocab_size, block_size or fit_block(RACE_BLOCK_V, vocab_size))
    num_vblocks, race_blocks = triton.cdiv(vocab_size, block_v), triton.cdiv(vocab_size, race_block)
    # Floors keep the number of compiled variants small (one per dtype/method for common shapes).
    return Geometry(block_v, num_vblocks, race_block, race_blocks,
                    nvb_pow2=max(64, triton.next_power_of_2(num_vblocks)),
                    race_pow2=max(64, triton.next_power_of_2(race_blocks)),
                    rows_pow2=max(16, triton.next_power_of_2(width)))
