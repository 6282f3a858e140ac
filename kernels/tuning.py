"""Launch parameters of the split-vocabulary passes (overridable from the environment for tuning).

Results do not depend on them beyond float32 ties (randomness is keyed by vocabulary index, never by
block). ``SPECFUZZ_BLOCK_V``, ``SPECFUZZ_STATS_WARPS``, ``SPECFUZZ_RACE_WARPS``,
``SPECFUZZ_PRUNED_RACE_WARPS`` (the warps of a pruned race, ``race_warps``), ``SPECFUZZ_RACE_MAXNREG``
(a register cap for the race kernel, pruned or not), ``SPECFUZZ_FUSE_DECIDE_MAX_REQS`` (the
largest chunk verified in one launch) and ``SPECFUZZ_CALL_PLANS=0`` (no per-layout call plans,
kernels/call_plan.py) override them;
``SPECFUZZ_PDL=0`` turns programmatic dependent launches off (kernels/dependent_launch.py);
``SPECFUZZ_RACE_PRUNE`` (``auto``, ``0``, ``1``) sets whether the race skips blocks that cannot hold
its winner (``race_prune``; the same results bit for bit either way);
``SPECFUZZ_TEST_TABLE_DELAY_NS`` (tests only) holds the row table that long before it writes, with
dependent launches on, so that a test can see a pass 1 that reads the table before its wait;
``SPECFUZZ_PASS1_TAIL`` picks how pass 1 keeps a near-one-hot block's tail (``branch``, the default,
or ``pair``: see ``pass1_pair_tail``). They are read once (``refresh()`` re-reads them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import kernels._device


@dataclass(frozen=True)
class Knobs:
    """The environment overrides, read once (``refresh()`` re-reads them: the tuning sweep does)."""

    block_v: int
    race_block_v: int
    stats_warps: int
    race_warps: int
    pruned_race_warps: int
    overlap: bool
    pass1_tail: str
    race_maxnreg: int
    fuse_decide_max_reqs: int
    call_plans: bool
    pipeline: bool
    pipeline_lag: int
    pipeline_maxnreg: int
    pipeline_p1_blocks: int
    pdl: bool
    race_prune: str
    table_delay_ns: int  # test-only (SPECFUZZ_TEST_TABLE_DELAY_NS, kernels/dependent_launch.hold)


_knobs: Knobs | None = None
# The race kernel's default register caps: uncapped, the bf16 race with draft logits took 108 registers
# offline (sm_90, triton 3.9). Capped at 64, race blocks of >= 1024 lanes compile without spills and
# four 8-warp programs fit on an SM; 512-lane blocks spill at 64, so they get 80 (``race_register_cap``).
# H200, 512 x {1, 8} x 262144 race + emit, cap 64 against none: 337 / 354, 371 / 385 us (bf16),
# 336 / 362, 380 / 410 (fp32) (docs/kernels.md, v13).
RACE_MAXNREG = 64
RACE_MAXNREG_SMALL_BLOCK = 80
# A pruned race program (4096 lanes) runs 4 warps, 32 lanes a thread, capped at 72 registers: H200,
# race launch at 512 x 1 x 262144, 8 warps / 64 registers -> 4 / 72: bf16 255.7 -> 202.6 us (point
# drafts), 298.0 -> 245.0 (draft logits); fp32 264.9 -> 218.0, 305.2 -> 257.9. 16 or 64 lanes a
# thread were slower, and so were caps of 96 and 128 (docs/kernels.md, v22).
PRUNED_RACE_WARPS = 4
PRUNED_RACE_MAXNREG = 72

# Bumped by every ``refresh()``: what was derived from the old knobs (kernels/call_plan.py) is stale.
generation = 0


def refresh() -> Knobs:
    global _knobs, generation
    interpreting = kernels._device.INTERPRETING
    env = os.environ
    knobs_read = Knobs(
        block_v=int(env.get("SPECFUZZ_BLOCK_V", 256 if interpreting else 8192)),
        race_block_v=int(env.get("SPECFUZZ_RACE_BLOCK_V", 256 if interpreting else 4096)),
        stats_warps=int(env.get("SPECFUZZ_STATS_WARPS", 8)),
        race_warps=int(env.get("SPECFUZZ_RACE_WARPS", 8)),
        pruned_race_warps=int(env.get("SPECFUZZ_PRUNED_RACE_WARPS", PRUNED_RACE_WARPS)),
        overlap=env.get("SPECFUZZ_OVERLAP", "0") == "1",
        pass1_tail=env.get("SPECFUZZ_PASS1_TAIL", "branch"),
        race_maxnreg=int(env.get("SPECFUZZ_RACE_MAXNREG", -1)),
        fuse_decide_max_reqs=int(env.get("SPECFUZZ_FUSE_DECIDE_MAX_REQS", FUSE_DECIDE_MAX_REQS)),
        call_plans=env.get("SPECFUZZ_CALL_PLANS", "1") != "0",
        pipeline=env.get("SPECFUZZ_PIPELINE", "0") == "1",
        pipeline_lag=int(env.get("SPECFUZZ_PIPELINE_LAG", PIPELINE_LAG_BLOCKS)),
        pipeline_maxnreg=int(env.get("SPECFUZZ_PIPELINE_MAXNREG", PIPELINE_MAXNREG)),
        pipeline_p1_blocks=max(1, int(env.get("SPECFUZZ_PIPELINE_P1_BLOCKS", PIPELINE_P1_BLOCKS))),
        pdl=env.get("SPECFUZZ_PDL", "1") != "0",
        race_prune=env.get("SPECFUZZ_RACE_PRUNE", "auto"),
        table_delay_ns=max(0, int(env.get("SPECFUZZ_TEST_TABLE_DELAY_NS", 0))),
    )
    if knobs_read.race_prune not in ("auto", "0", "1"):
        raise ValueError(f"SPECFUZZ_RACE_PRUNE={knobs_read.race_prune!r}: expected auto, 0 or 1")
    if knobs_read.pass1_tail not in PASS1_TAILS:
        raise ValueError(f"SPECFUZZ_PASS1_TAIL={knobs_read.pass1_tail!r}: expected one of {PASS1_TAILS}")
    _knobs = knobs_read
    generation += 1
    return _knobs


def knobs() -> Knobs:
    return _knobs or refresh()


def block_size() -> int:
    """Vocabulary block of the statistics and residual-mass passes; small under the interpreter so
    tests span several blocks."""
    return knobs().block_v


def race_block_size() -> int:
    """Largest vocabulary block of the sampling race (halved down to 512 when few requests)."""
    return knobs().race_block_v


def fit_block(block: int, vocab_size: int) -> int:
    """``block`` shrunk to the vocabulary (a power of two >= 16): small-V batches, such as the
    statistical layer's replicated requests, would otherwise run mostly masked lanes."""
    return min(block, max(16, 1 << max(0, vocab_size - 1).bit_length()))


def warps_for(block: int, cap: int) -> int:
    """At most ``cap`` warps, and no more than one per 256 lanes of the block."""
    return max(1, min(cap, block // 256))


def stats_warps(block: int = 1 << 30) -> int:
    return warps_for(block, knobs().stats_warps)


def race_warps(block: int = 1 << 30, prune: bool = False) -> int:
    """Warps of a race program: ``SPECFUZZ_RACE_WARPS`` (8), or ``SPECFUZZ_PRUNED_RACE_WARPS``
    (``PRUNED_RACE_WARPS``) for a pruned race."""
    return warps_for(block, knobs().pruned_race_warps if prune else knobs().race_warps)


def race_register_cap(block: int, prune: bool = False) -> dict:
    """Launch options capping the race kernel's registers: ``SPECFUZZ_RACE_MAXNREG`` when set (0:
    none), else ``PRUNED_RACE_MAXNREG`` for a pruned race, ``RACE_MAXNREG`` for race blocks of >= 1024
    lanes and ``RACE_MAXNREG_SMALL_BLOCK`` below."""
    cap = knobs().race_maxnreg
    if cap < 0:
        if prune:
            cap = PRUNED_RACE_MAXNREG
        else:
            cap = RACE_MAXNREG if block >= 1024 else RACE_MAXNREG_SMALL_BLOCK
    return _maxnreg(cap)


# The race of a chunk with at least this many raced entries (requests x V) is pruned: each block
# computes bounds of its scores, and the request's last block races only the blocks the bounds cannot
# rule out (residual_sample.race_block_program). The race is bound by its Philox integer work, which
# the bounds keep, so pruning saves only the floating-point part: on the H200 (docs/kernels.md, v21)
# the race took 0.88-0.95x the time at 512 x 262144 and 0.93-0.99x at 128 x 262144, but 1.03-1.12x
# at 512 x 32000, where the last block's serial races weigh more. With its own warps and cap (v22)
# the pruned race took 0.71-0.78x at 512 x 262144 and 0.84-0.93x at 128 x 262144; below the
# threshold it has not been re-measured. Decided per chunk, from the chunk's requests.
RACE_PRUNE_MIN_ENTRIES = 1 << 25


def race_prune(raced_entries: int) -> bool:
    """Whether a chunk's race is pruned (``SPECFUZZ_RACE_PRUNE``: ``1`` always, ``0`` never, ``auto``:
    from ``RACE_PRUNE_MIN_ENTRIES`` raced entries on, and always under the interpreter, so that the
    CPU tests run the pruned path). Only the race launch prunes; the single launch of small chunks and
    the pipelined launch never do."""
    setting = knobs().race_prune
    if setting != "auto":
        return setting == "1"
    return kernels._device.INTERPRETING or raced_entries >= RACE_PRUNE_MIN_ENTRIES


# Chunks of at most this many requests run the decide stages inside the passes before them
# (kernels/fused_decide.py): one launch fewer, one program deciding every request in turn.
FUSE_DECIDE_MAX_REQS = 4


# Opt-in (``SPECFUZZ_PIPELINE=1``): larger chunks without a second pass run as one pipelined launch
# (kernels/pipelined.py). The race of a request takes its tickets about ``SPECFUZZ_PIPELINE_LAG``
# pass-1 blocks after the request's pass-1 programs (each covering ``SPECFUZZ_PIPELINE_P1_BLOCKS``
# blocks of a row), and the launch's registers are capped at ``SPECFUZZ_PIPELINE_MAXNREG`` (0: no
# cap). The defaults were the best of the H200 sweep (docs/kernels.md, v13); off by default because
# it was not faster on most shapes.
PIPELINE_LAG_BLOCKS = 4096
PIPELINE_MAXNREG = 64
PIPELINE_P1_BLOCKS = 8


def pipeline_lag(slot_blocks: int) -> int:
    """Requests between a request's pass-1 slot (``slot_blocks`` pass-1 blocks) and its race blocks in
    ticket order (>= 1): ``SPECFUZZ_PIPELINE_LAG`` pass-1 blocks."""
    return max(1, -(-knobs().pipeline_lag // max(1, slot_blocks)))


def pipeline_register_cap() -> dict:
    """Launch options capping the pipelined kernel's registers (``SPECFUZZ_PIPELINE_MAXNREG``; 0: none)."""
    return _maxnreg(knobs().pipeline_maxnreg)


def _maxnreg(cap: int) -> dict:
    """Triton's launch option for a register cap (0: none)."""
    return {"maxnreg": cap} if cap else {}


def fuse_decide_max_reqs() -> int:
    """``SPECFUZZ_FUSE_DECIDE_MAX_REQS`` (0: never fuse)."""
    return knobs().fuse_decide_max_reqs


# Opt-in (``SPECFUZZ_OVERLAP=1``): large chunks are split into parts whose sampling race (ALU-bound)
# runs on a high-priority side stream while the next part's statistics pass (memory-bound) runs on the
# caller's stream. Off: on the H200 it was slower on every shape measured (v3, v14; docs/kernels.md).
OVERLAP_PARTS = 4
OVERLAP_MIN_PART = 32


PASS1_TAILS = ("branch", "pair")


def pass1_pair_tail() -> bool:
    """How pass 1 sums a block's tail without its max's 1 (kept when the block sum is below 2).

    ``branch`` (default): one sum; a branch the whole program takes re-sums the block's lanes off the
    max when its sum is below 2. ``pair``: the sum and the sum off the max on every block (v6).
    H200, 512 x 8 x 262144 bf16 pass 1 (docs/kernels.md, v7): branch 1195 us on standard-normal logits
    and 1654 us when every block is near one-hot (logits x 30); pair 1301-1322 us on both. Branch is
    slower once about a quarter of the blocks are near one-hot (for Gaussian logits: std / T above
    ~4), so ``pair`` suits traffic dominated by low temperatures. Results agree to float32 rounding.
    """
    return knobs().pass1_tail == "pair"


def overlap() -> bool:
    return knobs().overlap


_PDL_BY_DEVICE: dict = {}  # (device type, index, knobs generation) -> bool


def pdl_enabled(device) -> bool:
    """Whether a chunk's kernels on ``device`` run as programmatic dependent launches
    (kernels/dependent_launch.py): compiled CUDA kernels on compute capability >= 9.0, unless
    ``SPECFUZZ_PDL=0`` or the opt-in overlap (its race runs on a side stream) is on. The answer is
    cached per device and knobs generation: the driver asks once per chunk."""
    key = (device.type, device.index, generation)
    cached = _PDL_BY_DEVICE.get(key)
    if cached is not None:
        return cached
    k = knobs()
    enabled = bool(k.pdl and not k.overlap and not kernels._device.INTERPRETING and device.type == "cuda")
    if enabled:
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        enabled = torch.cuda.get_device_capability(index)[0] >= 9
    if device.index is not None:  # an index-less device means the current one, which can change
        _PDL_BY_DEVICE[(device.type, device.index, generation)] = enabled
    return enabled


def launch_jit(*, counts: tuple[str, ...] = (), small_pointers: tuple[str, ...] = ()):
    """``triton.jit`` for a top-level kernel, without value specialisation of ``counts`` (request,
    row, block counts: Triton would otherwise compile a variant for every ``== 1`` / ``% 16``
    pattern, and chunks or fuzzed batches hit many) and without alignment specialisation of
    ``small_pointers`` (metadata, outputs and workspace views read one scalar per program: chunk
    slices start at any offset). Logit pointers, strides and ``vocab_size`` stay specialised:
    they decide vectorised loads in the bandwidth-bound passes and are fixed per model. Launches go
    through ``kernels.launch.FastLaunch``."""
    import triton

    from kernels.launch import FastLaunch

    jit = triton.jit(do_not_specialize=counts, do_not_specialize_on_alignment=small_pointers)
    return lambda fn: FastLaunch(jit(fn), loose_names=(*counts, *small_pointers))
