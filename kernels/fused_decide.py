"""Small batches: the whole verification of a chunk in one launch (after the row table).

A chunk of at most ``tuning.FUSE_DECIDE_MAX_REQS`` requests is bound by host launch time
(20-27 us per launch on the H200's host, docs/kernels-log.md), not by the GPU, so one launch runs what
is otherwise three or five: pass 1, the decide stages, pass 2 (block verification with draft
logits) and the race. Its programs take roles in the order they start:

- each program first takes a ticket (``sync[0]``, an atomic counter), so a program knows that every
  program with a lower ticket has started. Tickets ``[0, P1)`` run a pass-1 block, then
  ``[P1, P1 + P2)`` a pass-2 block, then the race blocks. Hardware dispatch order never matters;
  a program only ever waits for programs with lower tickets, which are running or done, so the
  launch cannot deadlock however many programs fit on the GPU at once;
- the last pass-1 program to finish (``sync[1]`` counts them, an ``acq_rel`` add after a barrier, as
  in the race's last-block combine) runs ``decide.decide_request`` for every request in turn, then
  adds one more to ``sync[1]``: the stage is published. Pass-2 programs wait for that (volatile
  polling, then an acquire), and the last of them decides the DECIDE stage and publishes
  ``sync[2]``. Race programs wait for the last published stage.
- everything a program reads that another program wrote during the launch is loaded with ``.cg``
  (from L2, never a stale L1 line).

One program decides every request in sequence, which is why only small batches take this path
(docs/kernels-log.md: at 16 requests it is slower than the separate launches). The counters are
counted over the whole launch, not per request, so a ``cu`` the caller vouched for cannot leave a
stage unpublished. Results equal the separate launches' bit for bit: the same code with the same
warps (``decide.decide_warps``), so the same reduction order; the race's reductions are exact
(tests/kernels/test_fused_decide.py).
"""

from __future__ import annotations

from kernels._device import COMPILED
import triton
import triton.language as tl

from kernels import tuning
from kernels.decide import DECIDE_POINTERS, decide_request, decide_warps, pass1_block_width
from kernels.launch import launch_jit
from kernels.residual_mass import MASS_POINTERS, residual_mass_block
from kernels.residual_sample import race_block_program
from kernels.row_stats import block_statistics, launch_row_table

SMALL_POINTERS = tuple(dict.fromkeys(("row_scale_ptr", "row_req_ptr", "res_score_ptr", "res_index_ptr",
                                      "sync_ptr", *DECIDE_POINTERS, *MASS_POINTERS)))


@triton.jit
def fence_every_thread():
    """``fence.acq_rel.gpu`` on every thread. Triton issues a scalar atomic from one thread only, and
    that thread's release orders only its own stores; decide's per-row stores come from many
    threads, so each fences before the barrier that precedes the release (and after the one that
    follows an acquire). Compiled only: the interpreter runs one program at a time."""
    if COMPILED:
        tl.inline_asm_elementwise("fence.acq_rel.gpu;\n\tmov.u32 $0, $1;", "=r,r", [tl.program_id(0)],
                                  dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def finish_and_count(counter_ptr, num_programs):
    """Whether this program is the last of ``num_programs`` to get here (every earlier program's
    stores are then visible to it)."""
    fence_every_thread()
    tl.debug_barrier()
    return tl.atomic_add(counter_ptr, 1, sem="acq_rel") == num_programs - 1


@triton.jit
def publish(counter_ptr):
    """The stage's last program marks its decisions visible (the counter goes one past the count)."""
    fence_every_thread()
    tl.debug_barrier()
    tl.atomic_add(counter_ptr, 1, sem="release")


@triton.jit
def wait_for_stage(counter_ptr, published):
    """Spin until ``publish`` ran (polling from L2, then one acquire for the reads that follow).
    Compiled, the ticket order guarantees it runs (module docstring); interpreted, no spin: programs
    run one at a time in grid order, so a stage is published before any program that waits for it
    starts, or never (a bug, e.g. a mutant), and waiting would only hang."""
    seen = tl.load(counter_ptr, volatile=True)
    if COMPILED:
        while seen < published:
            seen = tl.load(counter_ptr, volatile=True)
    tl.atomic_add(counter_ptr, 0, sem="acquire")
    tl.debug_barrier()
    fence_every_thread()


@triton.jit
def decide_each_request(num_reqs, target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr, cu_ptr,
                        temperature_ptr, seeds_ptr, positions_ptr, blk_max_ptr, blk_tail_ptr, blk_arg_ptr,
                        row_max_ptr, row_log_sum_ptr, row_arg_ptr, logp_before_ptr, z_part_ptr, tau_ptr,
                        residual_logp_ptr, done_ptr, out_ids_ptr, out_num_ptr, out_logprobs_ptr, out_width,
                        num_target_rows, vocab_size, num_vblocks, BLOCK_METHOD: tl.constexpr,
                        HAS_DRAFT: tl.constexpr, COMBINE: tl.constexpr, DECIDE: tl.constexpr,
                        WANT_LOGPROBS: tl.constexpr, ROWS: tl.constexpr, NVB: tl.constexpr,
                        MODE_BLOCK: tl.constexpr):
    """``decide_request`` for requests 0, 1, ... in turn, reading statistics from L2 (``.cg``)."""
    for req in range(0, num_reqs):
        request = tl.program_id(0) * 0 + req  # a tensor: the interpreter's range yields plain ints
        decide_request(request, num_reqs, target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr,
                       cu_ptr, temperature_ptr, seeds_ptr, positions_ptr, blk_max_ptr, blk_tail_ptr,
                       blk_arg_ptr, row_max_ptr, row_log_sum_ptr, row_arg_ptr, logp_before_ptr, z_part_ptr,
                       tau_ptr, residual_logp_ptr, done_ptr, out_ids_ptr, out_num_ptr, out_logprobs_ptr,
                       out_width, num_target_rows, vocab_size, num_vblocks, BLOCK_METHOD, HAS_DRAFT, COMBINE,
                       DECIDE, WANT_LOGPROBS, ROWS, NVB, MODE_BLOCK, ".cg", False)


@launch_jit(counts=("out_width", "num_target_rows", "num_vblocks", "num_reqs", "pass1_programs",
                    "pass2_programs", "race_blocks"),
            small_pointers=SMALL_POINTERS)
def _small_batch_kernel(target_ptr, draft_ptr, target_stride, draft_stride, row_scale_ptr, row_req_ptr,
                        draft_ids_ptr, cu_ptr, temperature_ptr, seeds_ptr, positions_ptr,
                        blk_max_ptr, blk_tail_ptr, blk_arg_ptr, row_max_ptr, row_log_sum_ptr,
                        row_arg_ptr, logp_before_ptr, z_part_ptr, tau_ptr, residual_logp_ptr, done_ptr,
                        res_score_ptr, res_index_ptr, sync_ptr, out_ids_ptr, out_num_ptr, out_logprobs_ptr,
                        out_width, num_target_rows, vocab_size, num_vblocks, num_reqs, pass1_programs,
                        pass2_programs, race_blocks, BLOCK_V: tl.constexpr,
                        RACE_BLOCK: tl.constexpr, RACE_NVB: tl.constexpr, BLOCK_METHOD: tl.constexpr,
                        HAS_DRAFT: tl.constexpr, TWO_STAGE: tl.constexpr, WANT_LOGPROBS: tl.constexpr,
                        ROWS: tl.constexpr, NVB: tl.constexpr, MODE_BLOCK: tl.constexpr):
    """The module docstring's roles; ``TWO_STAGE``: block verification with draft logits."""
    ticket = tl.atomic_add(sync_ptr, 1)
    if ticket < pass1_programs:
        block_statistics(ticket // num_vblocks, ticket % num_vblocks, target_ptr, draft_ptr, target_stride,
                         draft_stride, row_scale_ptr, blk_max_ptr, blk_tail_ptr, blk_arg_ptr, num_target_rows,
                         vocab_size, num_vblocks, BLOCK_V, False)
        if finish_and_count(sync_ptr + 1, pass1_programs):
            decide_each_request(num_reqs, target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr,
                                cu_ptr, temperature_ptr, seeds_ptr, positions_ptr, blk_max_ptr, blk_tail_ptr,
                                blk_arg_ptr, row_max_ptr, row_log_sum_ptr, row_arg_ptr, logp_before_ptr,
                                z_part_ptr, tau_ptr, residual_logp_ptr, done_ptr, out_ids_ptr, out_num_ptr,
                                out_logprobs_ptr, out_width, num_target_rows, vocab_size, num_vblocks,
                                BLOCK_METHOD, HAS_DRAFT, True, not TWO_STAGE, WANT_LOGPROBS, ROWS, NVB,
                                MODE_BLOCK)
            publish(sync_ptr + 1)
    elif ticket < pass1_programs + pass2_programs:
        wait_for_stage(sync_ptr + 1, pass1_programs + 1)
        block = ticket - pass1_programs
        residual_mass_block(block // num_vblocks, block % num_vblocks, num_reqs, target_ptr, draft_ptr,
                            target_stride, draft_stride, temperature_ptr, row_max_ptr, row_log_sum_ptr,
                            row_req_ptr, logp_before_ptr, z_part_ptr, num_target_rows, vocab_size,
                            num_vblocks, BLOCK_V, False)
        if finish_and_count(sync_ptr + 2, pass2_programs):
            decide_each_request(num_reqs, target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr,
                                cu_ptr, temperature_ptr, seeds_ptr, positions_ptr, blk_max_ptr, blk_tail_ptr,
                                blk_arg_ptr, row_max_ptr, row_log_sum_ptr, row_arg_ptr, logp_before_ptr,
                                z_part_ptr, tau_ptr, residual_logp_ptr, done_ptr, out_ids_ptr, out_num_ptr,
                                out_logprobs_ptr, out_width, num_target_rows, vocab_size, num_vblocks,
                                True, True, False, True, WANT_LOGPROBS, ROWS, NVB, MODE_BLOCK)
            publish(sync_ptr + 2)
    else:
        if TWO_STAGE:
            wait_for_stage(sync_ptr + 2, pass2_programs + 1)
        else:
            wait_for_stage(sync_ptr + 1, pass1_programs + 1)
        block = ticket - pass1_programs - pass2_programs
        race_block_program(block // race_blocks, block % race_blocks, num_reqs, target_ptr, draft_ptr,
                           target_stride, draft_stride, draft_ids_ptr, cu_ptr, temperature_ptr, seeds_ptr,
                           positions_ptr, row_max_ptr, row_log_sum_ptr, tau_ptr, residual_logp_ptr,
                           res_score_ptr, res_index_ptr, done_ptr, out_ids_ptr, out_logprobs_ptr,
                           num_target_rows, vocab_size, race_blocks, out_width, HAS_DRAFT, RACE_BLOCK,
                           WANT_LOGPROBS, RACE_NVB, 1024, False)


def small_batch_applies(num_reqs: int, two_stage: bool, num_drafts: int) -> bool:
    """Whether a chunk runs as one launch: few requests, and (block verification with draft logits)
    at least one draft row, or pass 2 would have no program to publish its stage."""
    return num_reqs <= tuning.FUSE_DECIDE_MAX_REQS and not (two_stage and num_drafts == 0)


def launch_small_batch(ws, batch, num_reqs, geo, *, block_method, has_draft, two_stage, want_logprobs,
                       table_written=False):
    """The row table (unless ``table_written``) and then the whole verification of the chunk."""
    bind_small_batch(ws, batch, num_reqs, geo, block_method=block_method, has_draft=has_draft,
                     two_stage=two_stage, want_logprobs=want_logprobs,
                     table_written=table_written)(batch.out_ids.shape[1])


def bind_small_batch(ws, batch, num_reqs, geo, *, block_method, has_draft, two_stage, want_logprobs,
                     table_written=False):
    """``launch_small_batch`` with every argument bound except the outputs' width: returns
    ``launch(width)``. ``batch.out_ids`` / ``out_logprobs`` may be any contiguous storage of at least
    ``num_reqs * width`` entries (the kernel writes them as ``[num_reqs, width]`` row-major), so a
    caller can allocate and bind before it knows the width (the driver, while its value check is in
    flight) and then only launch."""
    target = batch.target_logits
    draft_stride = batch.draft_logits.stride(0) if has_draft else None
    small = SmallBatchLaunch(ws, num_reqs, geo, (*target.shape, target.stride(0)), draft_stride,
                             batch.draft_token_ids.shape[0], block_method=block_method, two_stage=two_stage,
                             want_logprobs=want_logprobs, variant=batch.variant)
    inputs = (batch.target_logits, batch.draft_logits, batch.draft_token_ids, batch.cu, batch.temperature,
              batch.seeds, batch.positions)
    outputs = (batch.out_ids, batch.out_num, batch.out_logprobs)

    def launch(width: int):
        if not table_written:
            launch_row_table(ws, batch.cu, batch.temperature, num_reqs, batch.target_logits.shape[0],
                             batch.variant)
        small(*inputs, *outputs, width)
    return launch


class SmallBatchLaunch:
    """The single launch of a small chunk with everything its layout fixes bound: the workspace, the
    grid, the counts, the constexprs and (through ``FastLaunch.bind``) the compiled kernel.
    ``target_layout``: ``(rows, vocab_size, row stride)`` of the target logits; ``draft_stride``: the
    draft logits' row stride, None without draft logits. A call passes only the tensors that change
    from call to call: ``(target, draft or None, draft_ids, cu, temperature, seeds, positions, out_ids,
    out_num, out_logprobs or None, width)``, where the logits have the layout, dtypes and alignment it
    was bound with (``variant``) and the outputs are contiguous storages of at least
    ``num_reqs * width`` entries. The row table must be written (by the value summary or
    ``launch_row_table``) before each launch. ``direct``: the compiled kernel is called directly."""

    def __init__(self, ws, num_reqs, geo, target_layout, draft_stride, num_drafts, *, block_method, two_stage,
                 want_logprobs, variant):
        has_draft = draft_stride is not None
        num_rows, vocab_size, target_stride = target_layout
        pass1 = (num_rows + (num_drafts if has_draft else 0)) * ws.num_vblocks
        pass2 = num_drafts * ws.num_vblocks if two_stage else 0
        grid = (pass1 + pass2 + num_reqs * geo.race_blocks,)
        self.has_draft, self.want_logprobs = has_draft, want_logprobs
        self.strides = (target_stride, draft_stride if has_draft else target_stride)
        self.workspace = (ws.row_scale, ws.row_req)
        self.statistics = (ws.blk_max, ws.blk_tail, ws.blk_arg, ws.row_max, ws.row_log_sum, ws.row_arg,
                           ws.logp_before, ws.z_part, ws.tau, ws.residual_logp, ws.done, ws.res_score,
                           ws.res_index, ws.sync)
        self.tail = (num_rows, vocab_size, ws.num_vblocks, num_reqs, pass1, pass2, geo.race_blocks)
        self.kernel = _small_batch_kernel.bind(grid, dict(
            BLOCK_V=geo.block_v, RACE_BLOCK=geo.race_block,
            RACE_NVB=geo.race_pow2, BLOCK_METHOD=block_method, HAS_DRAFT=has_draft, TWO_STAGE=two_stage,
            WANT_LOGPROBS=want_logprobs, ROWS=geo.rows_pow2, NVB=geo.nvb_pow2,
            MODE_BLOCK=pass1_block_width(vocab_size, ws.num_vblocks), num_warps=decide_warps(geo.block_v),
        ), variant)
        self.direct = getattr(self.kernel, "direct", False)

    def __call__(self, target, draft, draft_ids, cu, temperature, seeds, positions, out_ids, out_num,
                 out_logprobs, width):
        self.kernel(target, draft if self.has_draft else target, *self.strides, *self.workspace, draft_ids,
                    cu, temperature, seeds, positions, *self.statistics, out_ids, out_num,
                    out_logprobs if self.want_logprobs else out_num, width, *self.tail)
