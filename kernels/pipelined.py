"""Opt-in (``SPECFUZZ_PIPELINE=1``): pass 1, decide and the race of a larger chunk in one launch, with
the race of earlier requests running while later requests' rows are read.

Separate launches run the memory-bound pass 1 over every row, then decide, then the ALU-bound race,
so the race's Philox work and the reads never overlap (docs/kernels.md: at 512 x 1 x 262144 the reads
and the race's noise each take about as long as the whole 70 % budget). Here programs take roles by
ticket (an atomic counter, ``sync[0]``, as in kernels/fused_decide.py): ticket order is a sequence of
rounds, and round ``r`` holds

- the pass-1 *slot* of request ``r``: ``rows x row_programs`` programs, ``rows`` the most a request of
  the chunk can have (target rows ``0..k``, then draft rows ``0..k-1``), each program ``P1_BLOCKS``
  consecutive blocks of one row (``SPECFUZZ_PIPELINE_P1_BLOCKS``: one ticket, fence and count per
  program, not per block); programs past the request's own rows exit at once;
- then the race blocks of request ``r - lag`` (``tuning.pipeline_lag``: ``SPECFUZZ_PIPELINE_LAG``
  pass-1 blocks later, in whole requests, so that its decision is usually published by then).

The last pass-1 program of a request to finish (``done[num_reqs + req]`` counts them: an ``acq_rel``
add after a fence and a barrier) runs ``decide.decide_request`` for that request and publishes it
(one more add). Its race programs wait for that (volatile polling, then an acquire); greedy requests'
race programs do nothing. A program only ever waits for programs with lower tickets, which have
started, so the launch cannot deadlock whatever the dispatch order. A ``cu`` the caller vouched for is
read through the same clamped span (``row_stats.request_span``) by the counting and the waiting side,
so every wait ends. Results equal the separate launches bit for bit: the same functions with the same
warps (``decide.decide_warps``), so the same reduction order (tests/kernels/test_pipelined.py).
Block verification with draft logits needs a second pass over the rows between two decide stages and
keeps the separate launches. Off by default: on the H200 it was 11-18 % slower than the separate
launches on bf16 shapes (the race and pass 1 share issue slots and registers in one kernel) and 2-9 %
faster on three fp32 ones (docs/kernels.md, v13).
"""

from __future__ import annotations

import kernels._device  # noqa: F401
import triton
import triton.language as tl

from kernels import tuning
from kernels.decide import DECIDE_POINTERS, decide_request, decide_warps, pass1_block_width
from kernels.fused_decide import finish_and_count, publish, wait_for_stage
from kernels.residual_sample import race_block_program
from kernels.row_stats import block_statistics, launch_row_table, request_span

PIPELINE_POINTERS = tuple(dict.fromkeys(("row_scale_ptr", "res_score_ptr", "res_index_ptr", "sync_ptr",
                                         *DECIDE_POINTERS)))


@triton.jit
def _request_rows(cu_ptr, req, num_reqs, num_target_rows, out_width, HAS_DRAFT: tl.constexpr):
    """``(first draft row, draft count, pass-1 rows)`` of request ``req``: the clamped span both the
    counting and the waiting side read, so that every wait ends."""
    draft_row0, k = request_span(cu_ptr, req, num_target_rows - num_reqs, out_width - 1)
    return draft_row0, k, k + 1 + (k if HAS_DRAFT else 0)


@tuning.launch_jit(counts=("out_width", "num_target_rows", "num_vblocks", "num_reqs", "slot_programs",
                           "lag", "race_blocks", "row_programs"),
                   small_pointers=PIPELINE_POINTERS)
def _pipelined_kernel(target_ptr, draft_ptr, target_stride, draft_stride, row_scale_ptr, draft_ids_ptr,
                      cu_ptr, temperature_ptr, seeds_ptr, positions_ptr, blk_max_ptr, blk_tail_ptr,
                      blk_arg_ptr, row_max_ptr, row_log_sum_ptr, row_arg_ptr, logp_before_ptr, z_part_ptr,
                      tau_ptr, residual_logp_ptr, done_ptr, res_score_ptr, res_index_ptr, sync_ptr,
                      out_ids_ptr, out_num_ptr, out_logprobs_ptr, out_width, num_target_rows, vocab_size,
                      num_vblocks, num_reqs, slot_programs, lag, race_blocks, row_programs,
                      P1_BLOCKS: tl.constexpr, BLOCK_V: tl.constexpr,
                      PAIR_TAIL: tl.constexpr, RACE_BLOCK: tl.constexpr, RACE_NVB: tl.constexpr,
                      BLOCK_METHOD: tl.constexpr, HAS_DRAFT: tl.constexpr, WANT_LOGPROBS: tl.constexpr,
                      ROWS: tl.constexpr, NVB: tl.constexpr, MODE_BLOCK: tl.constexpr):
    """The module docstring's rounds."""
    ticket = tl.atomic_add(sync_ptr, 1)
    round_size = slot_programs + race_blocks
    rnd = ticket // round_size
    offset = ticket - rnd * round_size
    stage_ptr = done_ptr + num_reqs  # finished pass-1 programs per request, then one for the decision
    if offset < slot_programs:
        req = rnd
        if req < num_reqs:
            draft_row0, k, num_rows = _request_rows(cu_ptr, req, num_reqs, num_target_rows, out_width,
                                                    HAS_DRAFT)
            slot_row = offset // row_programs
            if slot_row < num_rows:
                row = tl.where(slot_row <= k, draft_row0 + req + slot_row,
                               num_target_rows + draft_row0 + slot_row - (k + 1))
                # P1_BLOCKS blocks of the row per program, in a loop: one ticket, fence and count per
                # program, not per block.
                first = (offset - slot_row * row_programs) * P1_BLOCKS
                for i in range(0, P1_BLOCKS):
                    if first + i < num_vblocks:
                        block_statistics(row, first + i, target_ptr, draft_ptr, target_stride, draft_stride,
                                         row_scale_ptr, blk_max_ptr, blk_tail_ptr, blk_arg_ptr,
                                         num_target_rows, vocab_size, num_vblocks, BLOCK_V, PAIR_TAIL,
                                         False)
                if finish_and_count(stage_ptr + req, num_rows * row_programs):
                    decide_request(req, num_reqs, target_ptr, draft_ptr, target_stride, draft_stride,
                                   draft_ids_ptr, cu_ptr, temperature_ptr, seeds_ptr, positions_ptr,
                                   blk_max_ptr, blk_tail_ptr, blk_arg_ptr, row_max_ptr, row_log_sum_ptr,
                                   row_arg_ptr, logp_before_ptr, z_part_ptr, tau_ptr, residual_logp_ptr,
                                   done_ptr, out_ids_ptr, out_num_ptr, out_logprobs_ptr, out_width,
                                   num_target_rows, vocab_size, num_vblocks, BLOCK_METHOD, HAS_DRAFT, True,
                                   True, WANT_LOGPROBS, ROWS, NVB, MODE_BLOCK, ".cg", False)
                    publish(stage_ptr + req)
    else:
        req = rnd - lag
        if (req >= 0) & (req < num_reqs):
            if tl.load(temperature_ptr + req).to(tl.float32) > 0:  # greedy: decide wrote the output
                _, _, num_rows = _request_rows(cu_ptr, req, num_reqs, num_target_rows, out_width, HAS_DRAFT)
                wait_for_stage(stage_ptr + req, num_rows * row_programs + 1)
                race_block_program(req, offset - slot_programs, num_reqs, target_ptr, draft_ptr,
                                   target_stride, draft_stride, draft_ids_ptr, cu_ptr, temperature_ptr,
                                   seeds_ptr, positions_ptr, row_max_ptr, row_log_sum_ptr, tau_ptr,
                                   residual_logp_ptr, res_score_ptr, res_index_ptr, done_ptr, out_ids_ptr,
                                   out_logprobs_ptr, num_target_rows, vocab_size, race_blocks, out_width,
                                   HAS_DRAFT, RACE_BLOCK, WANT_LOGPROBS, RACE_NVB, 1024, False)


def pipeline_applies(num_reqs: int, two_stage: bool) -> bool:
    """Whether a chunk too large for the small-batch launch runs as one pipelined launch."""
    return tuning.knobs().pipeline and not two_stage and num_reqs > tuning.fuse_decide_max_reqs()


def launch_pipelined(ws, batch, num_reqs, geo, *, block_method, has_draft, want_logprobs,
                     table_written=False):
    """The row table (unless ``table_written``: the value summary wrote it), then the one launch."""
    target = batch.target_logits
    num_rows, vocab_size = target.shape
    if not table_written:
        launch_row_table(ws, batch.cu, batch.temperature, num_reqs, num_rows, batch.variant)
    draft = batch.draft_logits if has_draft else target
    width = batch.out_ids.shape[1]
    p1_blocks = min(tuning.knobs().pipeline_p1_blocks, ws.num_vblocks)
    row_programs = -(-ws.num_vblocks // p1_blocks)
    slot_rows = (2 * width - 1) if has_draft else width
    slot_programs = slot_rows * row_programs
    lag = tuning.pipeline_lag(slot_rows * ws.num_vblocks)
    grid = ((num_reqs + lag) * (slot_programs + geo.race_blocks),)
    out_logprobs = batch.out_logprobs if want_logprobs else batch.out_num
    _pipelined_kernel[grid](
        target, draft, target.stride(0), draft.stride(0), ws.row_scale, batch.draft_token_ids, batch.cu,
        batch.temperature, batch.seeds, batch.positions, ws.blk_max, ws.blk_tail, ws.blk_arg, ws.row_max,
        ws.row_log_sum, ws.row_arg, ws.logp_before, ws.z_part, ws.tau, ws.residual_logp, ws.done,
        ws.res_score, ws.res_index, ws.sync, batch.out_ids, batch.out_num, out_logprobs, width, num_rows,
        vocab_size, ws.num_vblocks, num_reqs, slot_programs, lag, geo.race_blocks, row_programs,
        P1_BLOCKS=p1_blocks, BLOCK_V=geo.block_v, PAIR_TAIL=tuning.pass1_pair_tail(),
        RACE_BLOCK=geo.race_block, RACE_NVB=geo.race_pow2, BLOCK_METHOD=block_method, HAS_DRAFT=has_draft,
        WANT_LOGPROBS=want_logprobs,
        ROWS=geo.rows_pow2, NVB=geo.nvb_pow2, MODE_BLOCK=pass1_block_width(vocab_size, ws.num_vblocks),
        num_warps=decide_warps(geo.block_v), variant=batch.variant, **tuning.pipeline_register_cap(),
    )
