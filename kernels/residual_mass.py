"""Block verification pass 2 (draft logits present): residual masses ``Z_{i+1}`` per draft slot.

``Z_{i+1} = sum_v (p_i * b_{i+1}(v) - q_{i+1}(v))_+`` over target row ``i`` and draft row ``i`` of the
request, with ``log p_i`` from the decide kernel's ``COMBINE`` stage. Each term is formed from the logs
of its two sides, so it keeps float32 relative precision even when they agree to within float32's
epsilon (near-one-hot rows). One program per (draft row, vocab block) writes a partial sum; the
decide kernel's ``DECIDE`` stage adds the partials. Greedy requests, and slots whose ``Z`` cannot
change the decision (``log p_i`` stored as ``+inf``: kernels/decide.py), write 0 and read nothing.
"""

from __future__ import annotations

import kernels._device  # noqa: F401
import triton
import triton.language as tl

from kernels import dependent_launch, tuning
from kernels.dependent_launch import let_next_start, wait_for_previous
from kernels.fastmath import LOG2E, one_minus_exp2_negative
from kernels.decide import MASS_SKIPPED
from kernels.launch import launch_jit
from kernels.row_stats import NEG_INF, inverse_temperature, widen


MASS_POINTERS = ("cu_ptr", "temperature_ptr", "row_max_ptr", "row_log_sum_ptr", "row_req_ptr",
                 "logp_before_ptr", "z_part_ptr")


@launch_jit(counts=("num_target_rows", "num_vblocks"), small_pointers=MASS_POINTERS)
def _residual_mass_kernel(target_ptr, draft_ptr, target_stride, draft_stride, cu_ptr, temperature_ptr,
                          row_max_ptr, row_log_sum_ptr, row_req_ptr, logp_before_ptr, z_part_ptr,
                          num_target_rows, vocab_size, num_vblocks, BLOCK_V: tl.constexpr, PDL: tl.constexpr):
    let_next_start(PDL)
    residual_mass_block(tl.program_id(0), tl.program_id(1), num_target_rows - tl.num_programs(0), target_ptr,
                        draft_ptr, target_stride, draft_stride, temperature_ptr, row_max_ptr, row_log_sum_ptr,
                        row_req_ptr, logp_before_ptr, z_part_ptr, num_target_rows, vocab_size, num_vblocks,
                        BLOCK_V, PDL)


@triton.jit
def residual_mass_block(draft_row, vblock, num_reqs, target_ptr, draft_ptr, target_stride, draft_stride,
                        temperature_ptr, row_max_ptr, row_log_sum_ptr, row_req_ptr, logp_before_ptr,
                        z_part_ptr, num_target_rows, vocab_size, num_vblocks, BLOCK_V: tl.constexpr,
                        PDL: tl.constexpr):
    """The partial sum of ``Z`` over block ``vblock`` of draft row ``draft_row`` (module docstring);
    ``PDL``: a dependent launch (kernels/dependent_launch.py), whose wait precedes every load.

    Two load structures, chosen by the logits' width at compile time (measured on the H200, v14):
    float32 is memory-bound and fastest with both rows loaded at once under lane masks (greedy
    requests and skipped slots mask them off); 16-bit logits are issue-bound and fastest with
    unmasked loads of the blocks inside the row and a branch that skips greedy requests (4-10 %
    faster than v13's pass 2), a structure that made float32 5-9 % slower. Until v19 16-bit logits
    loaded their draft block before the wait; the skip needs the COMBINE stage's word first."""
    cols = vblock * BLOCK_V + tl.arange(0, BLOCK_V)
    MASKED: tl.constexpr = draft_ptr.dtype.element_ty.primitive_bitwidth == 32  # the float32 structure
    # Every load waits: whether the rows are read at all is the COMBINE stage's word (log p_i).
    wait_for_previous(PDL)
    # Clamped: rows of a wrong vouched ``cu`` may be in no request's span (their entry is stale).
    req = tl.minimum(tl.maximum(tl.load(row_req_ptr + num_target_rows + draft_row), 0), num_reqs - 1)
    target_row = draft_row + req  # target row i of the request sits at cu[r] + r + i
    temperature = tl.load(temperature_ptr + req).to(tl.float32)
    # decide's COMBINE stage wrote it, in the small-batch launch during this one: read past L1.
    log_p = tl.load(logp_before_ptr + draft_row, cache_modifier=".cg")
    wanted = (temperature > 0) & (log_p < MASS_SKIPPED)
    z = 0.0
    if MASKED:
        live = tl.where(wanted, cols < vocab_size, False)  # (vector & scalar breaks the interpreter)
        xd = widen(tl.load(draft_ptr + draft_row.to(tl.int64) * draft_stride + cols, mask=live,
                           other=NEG_INF))
        xt = widen(tl.load(target_ptr + target_row.to(tl.int64) * target_stride + cols, mask=live,
                           other=NEG_INF))
        z = _mass_sum(xt, xd, target_row, draft_row, temperature, row_max_ptr, row_log_sum_ptr,
                      tl.where(wanted, log_p, 0.0), num_target_rows)  # all lanes -inf when not wanted
    elif wanted:  # greedy requests and skipped slots read no row and write 0
        full = (vblock + 1) * BLOCK_V <= vocab_size
        xd = _load_block(draft_ptr + draft_row.to(tl.int64) * draft_stride, cols, vocab_size, full)
        xt = _load_block(target_ptr + target_row.to(tl.int64) * target_stride, cols, vocab_size, full)
        z = _mass_sum(xt, xd, target_row, draft_row, temperature, row_max_ptr, row_log_sum_ptr, log_p,
                      num_target_rows)
    tl.store(z_part_ptr + draft_row * num_vblocks + vblock, z)


@triton.jit
def _load_block(row_ptr, cols, vocab_size, full):
    """A block of a row as float32: without a mask when ``full`` (it lies inside the row), else
    ``-inf`` past ``vocab_size``."""
    if full:
        x = widen(tl.load(row_ptr + cols))
    else:
        x = widen(tl.load(row_ptr + cols, mask=cols < vocab_size, other=NEG_INF))
    return x


@triton.jit
def _mass_sum(xt, xd, target_row, draft_row, temperature, row_max_ptr, row_log_sum_ptr, log_p,
              num_target_rows):
    """``sum (p b - q)_+`` over one block of target logits ``xt`` and draft logits ``xd`` (-inf where
    masked). ``log2 (p b) = (x_t - max_t) s - (log sum_t - log p) log2 e`` and
    ``log2 q = (x_d - max_d) s - log sum_d log2 e``: the differences to the row maxima first, so that
    T = 1e-8 keeps them exact near the maxima."""
    scale = inverse_temperature(temperature) * LOG2E
    # decide's COMBINE stage wrote these, in the small-batch launch during this one: read past L1.
    t_max = tl.load(row_max_ptr + target_row, cache_modifier=".cg")
    t_shift = (tl.load(row_log_sum_ptr + target_row, cache_modifier=".cg") - log_p) * LOG2E
    q_row = num_target_rows + draft_row
    q_max = tl.load(row_max_ptr + q_row, cache_modifier=".cg")
    q_shift = tl.load(row_log_sum_ptr + q_row, cache_modifier=".cg") * LOG2E
    log2_pb = (xt - t_max) * scale - t_shift
    log2_q = (xd - q_max) * scale - q_shift
    gap = log2_q - log2_pb
    # 2^a (1 - 2^gap), not 2^a - 2^log2 q: near-equal p b and q (near-one-hot rows whose residual and
    # 1 - p are below float32's epsilon) must not cancel to 0 or to an ulp of 1. Lanes masked on the
    # target side have a gap of +inf or NaN: weight 0, as for gap >= 0.
    return tl.sum(tl.where(gap < 0, tl.exp2(log2_pb) * one_minus_exp2_negative(gap), 0.0), axis=0)


def launch_residual_mass(ws, batch, num_reqs, block_v, pdl=False):
    num_drafts = batch.draft_logits.shape[0]
    if num_drafts == 0:
        return
    _residual_mass_kernel[(num_drafts, ws.num_vblocks)](
        batch.target_logits, batch.draft_logits, batch.target_logits.stride(0), batch.draft_logits.stride(0),
        batch.cu, batch.temperature, ws.row_max, ws.row_log_sum, ws.row_req, ws.logp_before, ws.z_part,
        batch.target_logits.shape[0], batch.target_logits.shape[1], ws.num_vblocks,
        BLOCK_V=block_v, num_warps=tuning.stats_warps(block_v), variant=batch.variant,
        **dependent_launch.options(pdl),
    )
