"""Small batches: the decide stages fused into the passes before them (one launch fewer each).

A batch of at most ``tuning.fuse_decide_max_reqs()`` requests is bound by host launch time
(20-27 us per launch on the H200's host, docs/kernels.md), not by the GPU. Here the last program of
pass 1 (and, for block verification with draft logits, of pass 2) to finish runs
``decide.decide_request`` for every request of the chunk in turn, so ``_decide_kernel`` is not
launched. Which program is last is counted on ``done[0]`` (the row table zeroed it; an ``acq_rel``
add after a barrier, as the race's last-block combine does); that program resets it to 0 for the
race before deciding. The statistics it reads were written by other programs of the same launch,
so it loads them with ``.cg`` (from L2, past a possibly stale L1).

Counting every program of the launch, not a request's own, keeps this exact for any ``cu`` the
caller vouched for: the decide stage runs exactly once, after every block has stored. The price is
that one program decides all requests in sequence, which is why only small batches take this path.
Results equal the unfused launches' bit for bit: the same code, and the same warps
(``decide.decide_warps``), so the same reduction order (tests/kernels/test_fused_decide.py).
"""

from __future__ import annotations

import kernels._device  # noqa: F401
import triton
import triton.language as tl

from kernels import tuning
from kernels.decide import DECIDE_POINTERS, decide_arguments, decide_request, decide_warps, pass1_block_width
from kernels.residual_mass import MASS_POINTERS, residual_mass_block
from kernels.row_stats import block_statistics, launch_row_table

FUSED_POINTERS = tuple(dict.fromkeys(("row_scale_ptr", "row_req_ptr", *DECIDE_POINTERS, *MASS_POINTERS)))


@triton.jit
def last_program_of_launch(counter_ptr):
    """Whether this program is the launch's last to get here (every earlier program's stores are
    visible to it afterwards); that program resets the counter to 0."""
    tl.debug_barrier()
    finished = tl.atomic_add(counter_ptr, 1, sem="acq_rel")
    last = finished == tl.num_programs(0) * tl.num_programs(1) - 1
    if last:
        tl.store(counter_ptr, 0)
    return last


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
                       DECIDE, WANT_LOGPROBS, ROWS, NVB, MODE_BLOCK, ".cg")


@tuning.launch_jit(counts=("out_width", "num_target_rows", "num_vblocks", "num_reqs"),
                   small_pointers=FUSED_POINTERS)
def _pass_then_decide_kernel(target_ptr, draft_ptr, target_stride, draft_stride, row_scale_ptr, row_req_ptr,
                             draft_ids_ptr, cu_ptr, temperature_ptr, seeds_ptr, positions_ptr,
                             blk_max_ptr, blk_tail_ptr, blk_arg_ptr, row_max_ptr, row_log_sum_ptr,
                             row_arg_ptr, logp_before_ptr, z_part_ptr, tau_ptr, residual_logp_ptr, done_ptr,
                             out_ids_ptr, out_num_ptr, out_logprobs_ptr, out_width,
                             num_target_rows, vocab_size, num_vblocks, num_reqs,
                             PASS: tl.constexpr, BLOCK_V: tl.constexpr, PAIR_TAIL: tl.constexpr,
                             BLOCK_METHOD: tl.constexpr, HAS_DRAFT: tl.constexpr, DECIDE: tl.constexpr,
                             WANT_LOGPROBS: tl.constexpr, ROWS: tl.constexpr, NVB: tl.constexpr,
                             MODE_BLOCK: tl.constexpr):
    """``PASS`` 1: pass 1, then (last program) the decide kernel's COMBINE stage, and its DECIDE
    stage too when ``DECIDE``. ``PASS`` 2 (block verification with draft logits): pass 2, then the
    DECIDE stage."""
    if PASS == 1:
        block_statistics(tl.program_id(0), tl.program_id(1), target_ptr, draft_ptr, target_stride,
                         draft_stride, row_scale_ptr, blk_max_ptr, blk_tail_ptr, blk_arg_ptr, num_target_rows,
                         vocab_size, num_vblocks, BLOCK_V, PAIR_TAIL)
    else:
        residual_mass_block(tl.program_id(0), tl.program_id(1), num_reqs, target_ptr, draft_ptr,
                            target_stride, draft_stride, temperature_ptr, row_max_ptr, row_log_sum_ptr,
                            row_req_ptr, logp_before_ptr, z_part_ptr, num_target_rows, vocab_size,
                            num_vblocks, BLOCK_V)
    if last_program_of_launch(done_ptr):
        decide_each_request(num_reqs, target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr,
                            cu_ptr, temperature_ptr, seeds_ptr, positions_ptr, blk_max_ptr, blk_tail_ptr,
                            blk_arg_ptr, row_max_ptr, row_log_sum_ptr, row_arg_ptr, logp_before_ptr,
                            z_part_ptr, tau_ptr, residual_logp_ptr, done_ptr, out_ids_ptr, out_num_ptr,
                            out_logprobs_ptr, out_width, num_target_rows, vocab_size, num_vblocks,
                            BLOCK_METHOD, HAS_DRAFT, PASS == 1, DECIDE, WANT_LOGPROBS, ROWS, NVB, MODE_BLOCK)


def _launch_pass_then_decide(ws, batch, num_reqs, block_v, num_rows, *, pass_, block_method, has_draft,
                             decide, want_logprobs, rows, nvb_pow2):
    target = batch.target_logits
    draft = batch.draft_logits if has_draft else target
    _pass_then_decide_kernel[(num_rows, ws.num_vblocks)](
        target, draft, target.stride(0), draft.stride(0), ws.row_scale, ws.row_req,
        *decide_arguments(ws, batch, want_logprobs), num_reqs,
        PASS=pass_, BLOCK_V=block_v, PAIR_TAIL=tuning.pass1_pair_tail() and pass_ == 1,
        BLOCK_METHOD=block_method, HAS_DRAFT=has_draft, DECIDE=decide, WANT_LOGPROBS=want_logprobs, ROWS=rows,
        NVB=nvb_pow2, MODE_BLOCK=pass1_block_width(target.shape[1], ws.num_vblocks),
        num_warps=decide_warps(block_v), variant=batch.variant,
    )


def launch_row_stats_decide(ws, batch, num_reqs, block_v, *, block_method, has_draft, decide, want_logprobs,
                            rows, nvb_pow2, table_written=False):
    """``launch_row_stats`` then ``launch_decide(combine=True, decide=decide)``, in one launch (plus the
    row table's, unless ``table_written``)."""
    target = batch.target_logits
    if not table_written:
        launch_row_table(ws, batch.cu, batch.temperature, num_reqs, target.shape[0], batch.variant)
    num_rows = target.shape[0] + (batch.draft_logits.shape[0] if has_draft else 0)
    _launch_pass_then_decide(ws, batch, num_reqs, block_v, num_rows, pass_=1, block_method=block_method,
                             has_draft=has_draft, decide=decide, want_logprobs=want_logprobs, rows=rows,
                             nvb_pow2=nvb_pow2)


def launch_residual_mass_decide(ws, batch, num_reqs, block_v, *, want_logprobs, rows, nvb_pow2):
    """``launch_residual_mass`` then ``launch_decide(combine=False, decide=True)``, in one launch; the
    batch must have draft rows (without any, pass 2 has no programs to count)."""
    num_drafts = batch.draft_logits.shape[0]
    assert num_drafts > 0, "pass 2 without draft rows: launch the decide kernel instead"
    _launch_pass_then_decide(ws, batch, num_reqs, block_v, num_drafts, pass_=2, block_method=True,
                             has_draft=True, decide=True, want_logprobs=want_logprobs, rows=rows,
                             nvb_pow2=nvb_pow2)
