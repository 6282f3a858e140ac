"""Block verification pass 2 (draft logits present): residual masses ``Z_{i+1}`` per draft slot.

``Z_{i+1} = sum_v (p_i * b_{i+1}(v) - q_{i+1}(v))_+`` over target row ``i`` and draft row ``i`` of the
request, with ``log p_i`` from the decide kernel's ``COMBINE`` stage. Each term is formed from the logs
of its two sides, so it keeps float32 relative precision even when they agree to within float32's
epsilon (near-one-hot rows). One program per (draft row, vocab block) writes a partial sum; the
decide kernel's ``DECIDE`` stage adds the partials. Greedy requests write 0 and read nothing.
"""

from __future__ import annotations

import kernels._device  # noqa: F401
import triton
import triton.language as tl

from kernels import tuning
from kernels.fastmath import LOG2E, one_minus_exp2
from kernels.row_stats import inverse_temperature, log2_prob


MASS_POINTERS = ("cu_ptr", "temperature_ptr", "row_max_ptr", "row_log_sum_ptr", "row_req_ptr",
                 "logp_before_ptr", "z_part_ptr")


@tuning.launch_jit(counts=("num_target_rows", "num_vblocks"), small_pointers=MASS_POINTERS)
def _residual_mass_kernel(target_ptr, draft_ptr, target_stride, draft_stride, cu_ptr, temperature_ptr,
                          row_max_ptr, row_log_sum_ptr, row_req_ptr, logp_before_ptr, z_part_ptr,
                          num_target_rows, vocab_size, num_vblocks, BLOCK_V: tl.constexpr):
    residual_mass_block(tl.program_id(0), tl.program_id(1), num_target_rows - tl.num_programs(0), target_ptr,
                        draft_ptr, target_stride, draft_stride, temperature_ptr, row_max_ptr, row_log_sum_ptr,
                        row_req_ptr, logp_before_ptr, z_part_ptr, num_target_rows, vocab_size, num_vblocks,
                        BLOCK_V)


@triton.jit
def residual_mass_block(draft_row, vblock, num_reqs, target_ptr, draft_ptr, target_stride, draft_stride,
                        temperature_ptr, row_max_ptr, row_log_sum_ptr, row_req_ptr, logp_before_ptr,
                        z_part_ptr, num_target_rows, vocab_size, num_vblocks, BLOCK_V: tl.constexpr):
    """The partial sum of ``Z`` over block ``vblock`` of draft row ``draft_row`` (module docstring)."""
    cols = vblock * BLOCK_V + tl.arange(0, BLOCK_V)
    # Issued first: the draft row does not depend on the request lookup.
    xd = tl.load(draft_ptr + draft_row.to(tl.int64) * draft_stride + cols, mask=cols < vocab_size,
                 other=float("-inf")).to(tl.float32)
    # Clamped: rows of a wrong vouched ``cu`` may be in no request's span (their entry is stale).
    req = tl.minimum(tl.maximum(tl.load(row_req_ptr + num_target_rows + draft_row), 0), num_reqs - 1)
    target_row = draft_row + req  # target row i of the request sits at cu[r] + r + i
    temperature = tl.load(temperature_ptr + req).to(tl.float32)
    inv_t = inverse_temperature(temperature)
    live = tl.where(temperature > 0, cols < vocab_size, False)  # (vector & scalar breaks the interpreter)
    xt = tl.load(target_ptr + target_row.to(tl.int64) * target_stride + cols, mask=live,
                 other=float("-inf")).to(tl.float32)
    # decide's COMBINE stage wrote these, in the small-batch launch during this one: read past L1
    t_max = tl.load(row_max_ptr + target_row, cache_modifier=".cg")
    log2_b = log2_prob(xt, t_max, inv_t, tl.load(row_log_sum_ptr + target_row, cache_modifier=".cg"))
    log2_pb = tl.load(logp_before_ptr + draft_row, cache_modifier=".cg") * LOG2E + log2_b
    q_row = num_target_rows + draft_row
    q_max = tl.load(row_max_ptr + q_row, cache_modifier=".cg")
    log2_q = log2_prob(xd, q_max, inv_t, tl.load(row_log_sum_ptr + q_row, cache_modifier=".cg"))
    # 2^a (1 - 2^(log2 q - a)), not 2^a - 2^log2 q: near-equal p b and q (near-one-hot rows whose
    # residual and 1 - p are below float32's epsilon) must not cancel to 0 or to an ulp of 1.
    # Lanes that are not live read -inf on the target side, so their gap is +inf or NaN: weight 0.
    gap = log2_q - log2_pb
    weight = tl.where(gap < 0, tl.exp2(log2_pb) * one_minus_exp2(gap), 0.0)
    tl.store(z_part_ptr + draft_row * num_vblocks + vblock, tl.sum(weight, axis=0))


def launch_residual_mass(ws, batch, num_reqs, block_v):
    num_drafts = batch.draft_logits.shape[0]
    if num_drafts == 0:
        return
    _residual_mass_kernel[(num_drafts, ws.num_vblocks)](
        batch.target_logits, batch.draft_logits, batch.target_logits.stride(0), batch.draft_logits.stride(0),
        batch.cu, batch.temperature, ws.row_max, ws.row_log_sum, ws.row_req, ws.logp_before, ws.z_part,
        batch.target_logits.shape[0], batch.target_logits.shape[1], ws.num_vblocks,
        BLOCK_V=block_v, num_warps=tuning.stats_warps(block_v), variant=batch.variant,
    )
