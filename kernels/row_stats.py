"""Pass 1: per-(row, vocab block) statistics of every target and draft row, one read of each row.

For row ``n`` and vocab block ``j`` it stores, with ``s = 1/T`` for sampled rows and ``s = 1`` for
greedy rows (``T == 0``: raw logits, which is what greedy logprobs need):

- ``blk_max[n, j]``  the largest raw logit of the block (masked lanes are ``-inf``, never 0);
- ``blk_tail[n, j]`` ``sum exp((x - blk_max) * s) - 1``, summed without the max's own 1 (so a
                    tail below float32's epsilon survives: near-one-hot rows at tiny temperatures);
                    ``-1`` for an all ``-inf`` block;

Greedy rows' argmax is not taken here: decide finds it in the row's first block attaining the row
max (``decide._greedy_argmax``). Here it cost every program its code even where no row is greedy:
H200, 512 x 9 x 262144 bf16 rows, all sampled, 612.8 -> 568.2 us without it (docs/kernels-log.md, v24).

Scaling the difference ``x - max`` rather than ``x`` itself keeps tiny temperatures (1e-8) exact to
float32 rounding of the difference. Rows are ``[0, num_target_rows)`` target then draft rows. A tiny
first launch (one program per request) writes each row's request and scale into a table, so a
pass-1 program issues its row load and its one table load at once, with no dependent search.
"""

from __future__ import annotations

import kernels._device  # noqa: F401
import triton
import triton.language as tl

from kernels import chunking, dependent_launch, tuning
from kernels.dependent_launch import let_next_start, wait_for_previous
from kernels.fastmath import LOG2E
from kernels.launch import launch_jit

NEG_INF = tl.constexpr(float("-inf"))
STREAM = tl.constexpr("evict_first")
TABLE_BLOCK = 32  # rows of the row table one store covers
SYNC_WORDS = tl.constexpr(chunking.SYNC_WORDS)
# ``residual_sample.ordered_key(-inf)``: a request's race best score before any block finishes
RACE_BEST_UNSET = tl.constexpr(-2139095041)


@triton.jit
def inverse_temperature(temperature):
    """1/T for sampled rows, 1 for greedy rows (``T`` not > 0: 0, and anything the checks reject)."""
    greedy = ~(temperature > 0)
    return tl.where(greedy, 1.0, 1.0 / tl.where(greedy, 1.0, temperature))


@triton.jit
def log_prob(x, row_max, inv_t, row_log_sum):
    """log softmax(row / T) at logits ``x``, from the row's raw max and log sum of exp."""
    return (x - row_max) * inv_t - row_log_sum


@triton.jit
def log2_prob(x, row_max, inv_t, row_log_sum):
    """``log2 softmax(row / T)`` at logits ``x`` (``log_prob`` in base 2: the race works in log2)."""
    return (x - row_max) * (inv_t * LOG2E) - row_log_sum * LOG2E


@triton.jit
def request_span(cu_ptr, req, num_drafts, max_k):
    """``(first draft row, draft count)`` of request ``req``: ``cu`` read relative to ``cu[0]``, then
    clamped to ``[0, num_drafts]`` and to at most ``max_k`` drafts. A valid ``cu`` is unchanged; a
    wrong one that the caller vouched for (``draft_lengths`` skips the value check) keeps every
    kernel inside its buffers (tests/kernels/test_vouched_metadata.py)."""
    cu0 = tl.load(cu_ptr)
    start = tl.minimum(tl.maximum(tl.load(cu_ptr + req) - cu0, 0), num_drafts)
    end = tl.minimum(tl.maximum(tl.load(cu_ptr + req + 1) - cu0, start), num_drafts)
    return start, tl.minimum(end - start, max_k)


@triton.jit
def write_row_table(req, cu_ptr, temperature_ptr, row_scale_ptr, row_req_ptr, done_ptr, sync_ptr,
                    num_target_rows, num_reqs, BLOCK: tl.constexpr):
    """Request ``req``'s rows of the row table: ``scale = 1/T`` (``-1`` marks a greedy row) and the
    request index. Also zeroes the request's counter of finished race blocks (``residual_sample``),
    resets its race's best score so far (``done[2 * num_reqs + req]``, the race's pruning) to -inf,
    and request 0 zeroes the small-batch launch's counters that follow them (``chunking.SYNC_WORDS``)."""
    tl.store(done_ptr + req, 0)
    tl.store(done_ptr + 2 * num_reqs + req, RACE_BEST_UNSET)
    if req == 0:
        sync = tl.arange(0, 4)
        tl.store(sync_ptr + sync, 0 * sync, mask=sync < SYNC_WORDS)
    num_drafts = num_target_rows - num_reqs
    draft_row0, k = request_span(cu_ptr, req, num_drafts, num_drafts)
    temperature = tl.load(temperature_ptr + req).to(tl.float32)
    scale = tl.where(temperature > 0, inverse_temperature(temperature), -1.0)
    for j0 in range(0, k + 1, BLOCK):
        j = j0 + tl.arange(0, BLOCK)
        target_rows = draft_row0 + req + j
        tl.store(row_scale_ptr + target_rows, scale + 0.0 * j, mask=j <= k)
        tl.store(row_req_ptr + target_rows, req + 0 * j, mask=j <= k)
        draft_rows = num_target_rows + draft_row0 + j
        tl.store(row_scale_ptr + draft_rows, scale + 0.0 * j, mask=j < k)
        tl.store(row_req_ptr + draft_rows, req + 0 * j, mask=j < k)


@launch_jit(counts=("num_target_rows",),
            small_pointers=("cu_ptr", "temperature_ptr", "row_scale_ptr", "row_req_ptr", "done_ptr",
                            "sync_ptr"))
def _row_table_kernel(cu_ptr, temperature_ptr, row_scale_ptr, row_req_ptr, done_ptr, sync_ptr,
                      num_target_rows, BLOCK: tl.constexpr, PDL: tl.constexpr, DELAY_NS: tl.constexpr):
    """One program per request (the default path's value summary writes the table itself instead).
    The chunk's first kernel: a plain launch, so it runs after everything before it in the stream.
    ``DELAY_NS``: a test-only wait before the table is written (``dependent_launch.hold``)."""
    let_next_start(PDL)
    dependent_launch.hold(DELAY_NS)
    write_row_table(tl.program_id(0), cu_ptr, temperature_ptr, row_scale_ptr, row_req_ptr, done_ptr,
                    sync_ptr, num_target_rows, tl.num_programs(0), BLOCK)


@triton.jit
def widen(x):
    """Logits as float32. bf16 is float32's upper half, so its bits are shifted into place: one
    instruction per element, where ``.to(tl.float32)`` costs 1.5 (sm_90: PRMT + IMAD for the upper
    element of each pair). Exact for every value, NaN and infinities included."""
    if x.dtype == tl.bfloat16:
        return (x.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    else:
        return x.to(tl.float32)


@triton.jit
def stacked_row(target_ptr, draft_ptr, target_stride, draft_stride, row, num_target_rows):
    """Pointer to row ``row`` of pass 1's stacked view: target rows first, then draft rows."""
    if row < num_target_rows:
        row_ptr = target_ptr + row.to(tl.int64) * target_stride
    else:
        row_ptr = draft_ptr + (row - num_target_rows).to(tl.int64) * draft_stride
    return row_ptr


@launch_jit(counts=("num_target_rows", "num_vblocks"),
            small_pointers=("row_scale_ptr", "blk_max_ptr", "blk_tail_ptr", "blk_arg_ptr"))
def _row_stats_kernel(target_ptr, draft_ptr, target_stride, draft_stride, row_scale_ptr,
                      blk_max_ptr, blk_tail_ptr, blk_arg_ptr, num_target_rows, vocab_size, num_vblocks,
                      BLOCK_V: tl.constexpr, PDL: tl.constexpr):
    let_next_start(PDL)
    block_statistics(tl.program_id(0), tl.program_id(1), target_ptr, draft_ptr, target_stride, draft_stride,
                     row_scale_ptr, blk_max_ptr, blk_tail_ptr, blk_arg_ptr, num_target_rows, vocab_size,
                     num_vblocks, BLOCK_V, PDL)


@triton.jit
def block_statistics(row, vblock, target_ptr, draft_ptr, target_stride, draft_stride, row_scale_ptr,
                     blk_max_ptr, blk_tail_ptr, blk_arg_ptr, num_target_rows, vocab_size, num_vblocks,
                     BLOCK_V: tl.constexpr, PDL: tl.constexpr):
    """Pass 1 for (``row``, ``vblock``): the module docstring's three statistics. ``PDL``: launched
    as a dependent launch (kernels/dependent_launch.py), so the row table is read after the wait."""
    row_ptr = stacked_row(target_ptr, draft_ptr, target_stride, draft_stride, row, num_target_rows)
    cols = vblock * BLOCK_V + tl.arange(0, BLOCK_V)
    # evict_first: each logit is read once here (the race re-reads one row per request, long after);
    # H200, 512 x 8 x 262144: bf16 1179 -> 1123 us, fp32 2084 -> 2011 us.
    # Blocks inside the row load without a mask (no -inf fill: ~0.5 instructions per bf16 element).
    if (vblock + 1) * BLOCK_V <= vocab_size:
        x = widen(tl.load(row_ptr + cols, eviction_policy=STREAM))
    else:
        x = widen(tl.load(row_ptr + cols, mask=cols < vocab_size, other=NEG_INF, eviction_policy=STREAM))
    wait_for_previous(PDL)
    scale = tl.load(row_scale_ptr + row)
    greedy = scale < 0
    exp2_scale = tl.where(greedy, 1.0, scale) * LOG2E

    block_max = tl.max(x, axis=0)
    # Every lane at the max adds exactly 1. With several such lanes, or a tail >= 1, the tail is
    # ``block_sum - 1`` to float32 rounding. Otherwise the one max's 1 would swallow a tail below
    # float32's epsilon (a near-one-hot block at a small temperature), so the other lanes are also
    # summed without it, in a branch the whole program takes. H200, 512 x 8 x 262144 bf16 pass 1
    # (docs/kernels-log.md, v7): 1195 us on standard-normal logits, 1654 us when every block is near
    # one-hot; summing both on every block instead took 1301-1322 us on both (removed: most blocks
    # of real traffic are not near one-hot).
    block_sum = tl.sum(tl.exp2((x - block_max) * exp2_scale), axis=0)
    block_tail = block_sum - 1.0
    if block_sum < 2.0:
        # The same values bit for bit ((m - x)(-s) == (x - m)s), spelled so that the compiler
        # recomputes them here instead of keeping all of them live across the branch.
        e = tl.exp2((block_max - x) * (-exp2_scale))
        block_tail = tl.sum(tl.where(x == block_max, 0.0, e), axis=0)
    block_tail = tl.where(block_max == float("-inf"), -1.0, block_tail)
    out = row * num_vblocks + vblock
    tl.store(blk_max_ptr + out, block_max)
    tl.store(blk_tail_ptr + out, block_tail)


def launch_row_table(ws, cu, temperature, num_reqs, num_target_rows, variant=None, pdl=False):
    """The row table and zeroed race counters of a chunk (one program per request); ``pdl``: the
    kernels after it are dependent launches."""
    _row_table_kernel[(num_reqs,)](cu, temperature, ws.row_scale, ws.row_req, ws.done, ws.sync,
                                   num_target_rows, BLOCK=TABLE_BLOCK,
                                   DELAY_NS=dependent_launch.TEST_TABLE_DELAY_NS if pdl else 0,
                                   variant=variant, **dependent_launch.options(pdl, first=True))


def bind_row_table(ws, num_reqs, num_target_rows, variant):
    """``launch_row_table`` with its layout bound (before a single launch, which is a plain one):
    returns ``launch(cu, temperature)``."""
    kernel = _row_table_kernel.bind((num_reqs,), dict(BLOCK=TABLE_BLOCK, PDL=False, DELAY_NS=0), variant)
    tail = (ws.row_scale, ws.row_req, ws.done, ws.sync, num_target_rows)
    return lambda cu, temperature: kernel(cu, temperature, *tail)


def launch_row_stats(ws, target_logits, draft_logits, cu, temperature, num_reqs, block_v, variant=None,
                     table_written=False, pdl=False):
    """Fill the row table (unless ``table_written``: the value summary did), then
    ``ws.blk_max/blk_tail`` for target rows then draft rows (``ws.blk_arg`` is not written since v24:
    decide finds greedy rows' argmax). ``pdl``: pass 1 is a dependent
    launch after the table (after the summary it is the chunk's first kernel: a plain launch)."""
    num_target_rows, vocab_size = target_logits.shape
    num_draft_rows = 0 if draft_logits is None else draft_logits.shape[0]
    draft = target_logits if draft_logits is None else draft_logits
    if not table_written:
        launch_row_table(ws, cu, temperature, num_reqs, num_target_rows, variant, pdl)
    grid = (num_target_rows + num_draft_rows, ws.num_vblocks)
    _row_stats_kernel[grid](
        target_logits, draft, target_logits.stride(0), draft.stride(0), ws.row_scale,
        ws.blk_max, ws.blk_tail, ws.blk_arg, num_target_rows, vocab_size, ws.num_vblocks,
        BLOCK_V=block_v, num_warps=tuning.stats_warps(block_v),
        variant=variant, **dependent_launch.options(pdl, first=table_written),
    )
