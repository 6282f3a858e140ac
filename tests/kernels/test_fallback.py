"""The empty-residual fallback (interfaces.md section 1) races over the target row with the same
uniforms. Float rounding is what empties a residual, so no natural input reaches it reliably: the
test empties the race partials by hand and checks the fallback picks what the bonus race picks
(for a bonus, the residual IS the target row)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernels import tuning
from kernels.chunking import Workspace
from kernels.decide import launch_decide
from kernels.driver import ChunkTensors
from kernels.residual_sample import emit_request, launch_residual_sample
from kernels.row_stats import launch_row_stats
from tests.kernels._batches import DEVICE, make_batch


@triton.jit
def _emit_only_kernel(target_ptr, target_stride, cu_ptr, temperature_ptr, seeds_ptr, positions_ptr,
                      row_max_ptr, row_log_sum_ptr, tau_ptr, res_score_ptr, res_index_ptr, out_ids_ptr,
                      out_logprobs_ptr,
                      out_width, vocab_size, num_blocks, NVB: tl.constexpr, FALLBACK_BLOCK: tl.constexpr):
    """Pass B alone (in production the race's last block runs it)."""
    req = tl.program_id(0)
    target_row0 = tl.load(cu_ptr + req) - tl.load(cu_ptr) + req
    emit_request(req, target_ptr, target_stride, target_row0, temperature_ptr, seeds_ptr,
                 positions_ptr, row_max_ptr, row_log_sum_ptr, tau_ptr, res_score_ptr, res_index_ptr,
                 out_ids_ptr, out_logprobs_ptr, out_width, vocab_size, num_blocks, False, NVB, FALLBACK_BLOCK)


@pytest.mark.interpreter
def test_fallback_equals_bonus_race():
    batch = make_batch(41, lengths=[0, 0], vocab=600, greedy_fraction=0.0, with_draft=False)
    block = tuning.block_size()
    nvb = -(-600 // block)
    ws = Workspace.allocate(2, 0, 2, nvb, nvb, DEVICE)
    out_ids = torch.full((2, 1), -7, dtype=torch.int64, device=DEVICE)
    out_num = torch.empty(2, dtype=torch.int32, device=DEVICE)
    chunk = ChunkTensors(*batch.args(), out_ids, out_num, None)
    launch_row_stats(ws, chunk.target_logits, None, chunk.cu, chunk.temperature, 2, block)
    launch_decide(ws, chunk, 2, block_method=False, has_draft=False, want_logprobs=False, rows=16,
                  nvb_pow2=64, combine=True, decide=True)
    sample = dict(has_draft=False, want_logprobs=False, race_block=block, race_blocks=nvb, nvb_pow2=64)
    launch_residual_sample(ws, chunk, 2, **sample)
    bonus = out_ids.clone()
    # Re-run only the emit step with every race partial emptied: it must fall back to the same race.
    ws.res_score.fill_(float("-inf"))
    ws.res_index.fill_(12345)  # poisoned: using these indices would be out of range
    out_ids.fill_(-7)
    _emit_only_kernel[(2,)](
        chunk.target_logits, chunk.target_logits.stride(0), chunk.cu, chunk.temperature, chunk.seeds,
        chunk.positions, ws.row_max, ws.row_log_sum, ws.tau, ws.res_score, ws.res_index, out_ids, out_num,
        1, 600, nvb, NVB=64, FALLBACK_BLOCK=128)
    assert torch.equal(out_ids, bonus), (out_ids, bonus)
    assert (bonus >= 0).all()
