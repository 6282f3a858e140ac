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
from kernels.residual_sample import _race_candidates, _race_request, emit_request, launch_residual_sample
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
                 out_ids_ptr, out_logprobs_ptr, out_width, vocab_size, num_blocks, 0.0, 0, False, NVB,
                 FALLBACK_BLOCK, False)


@triton.jit
def _pruned_emit_only_kernel(target_ptr, cu_ptr, temperature_ptr, seeds_ptr, positions_ptr, row_max_ptr,
                             row_log_sum_ptr, tau_ptr, residual_logp_ptr, res_score_ptr, res_index_ptr,
                             done_ptr, out_ids_ptr, out_width, vocab_size, num_blocks, NVB: tl.constexpr,
                             BLOCK: tl.constexpr):
    """The pruned race's last-block step alone (point drafts): ``_race_candidates``, then the emit."""
    req = tl.program_id(0)
    num_reqs = tl.num_programs(0)
    stride = vocab_size
    (inv_t, t_row_ptr, q_row_ptr, row_max, a_log_sum, q_max, q_log_sum, rejected, excluded, seed, position,
     draft_row0) = _race_request(req, num_reqs, target_ptr, target_ptr, stride, stride, cu_ptr, cu_ptr,
                                 temperature_ptr, seeds_ptr, positions_ptr, row_max_ptr, row_log_sum_ptr,
                                 tau_ptr, residual_logp_ptr, num_reqs, out_width, False)
    best, token = _race_candidates(req, num_reqs, t_row_ptr, q_row_ptr, vocab_size, row_max, inv_t,
                                   a_log_sum, q_max, q_log_sum, rejected, excluded, seed, position,
                                   res_score_ptr, done_ptr, num_blocks, False, BLOCK, NVB)
    emit_request(req, target_ptr, stride, draft_row0 + req, temperature_ptr, seeds_ptr, positions_ptr,
                 row_max_ptr, row_log_sum_ptr, tau_ptr, res_score_ptr, res_index_ptr, out_ids_ptr,
                 out_ids_ptr, out_width, vocab_size, num_blocks, best, token, False, NVB, 128, True)


def _bonus_chunk(seed: int, num_reqs: int):
    """A chunk of ``num_reqs`` requests without drafts (every race is a bonus race over V = 600),
    decided: ``(chunk, workspace, output ids, race block, race blocks)``."""
    batch = make_batch(seed, lengths=[0] * num_reqs, vocab=600, greedy_fraction=0.0, with_draft=False)
    block = tuning.BLOCK_V
    nvb = -(-600 // block)
    ws = Workspace.allocate(num_reqs, 0, num_reqs, nvb, nvb, DEVICE)
    out_ids = torch.full((num_reqs, 1), -7, dtype=torch.int64, device=DEVICE)
    out_num = torch.empty(num_reqs, dtype=torch.int32, device=DEVICE)
    chunk = ChunkTensors(*batch.args(), out_ids, out_num, None)
    launch_row_stats(ws, chunk.target_logits, None, chunk.cu, chunk.temperature, num_reqs, block)
    launch_decide(ws, chunk, num_reqs, block_method=False, has_draft=False, want_logprobs=False, rows=16,
                  nvb_pow2=64, combine=True, decide=True)
    return chunk, ws, out_ids, block, nvb


@pytest.mark.interpreter
def test_fallback_equals_bonus_race():
    chunk, ws, out_ids, block, nvb = _bonus_chunk(41, 2)
    launch_residual_sample(ws, chunk, 2, has_draft=False, want_logprobs=False, race_block=block,
                           race_blocks=nvb, nvb_pow2=64)
    bonus = out_ids.clone()
    # Re-run only the emit step with every race partial emptied: it must fall back to the same race.
    ws.res_score.fill_(float("-inf"))
    ws.res_index.fill_(12345)  # poisoned: using these indices would be out of range
    out_ids.fill_(-7)
    _emit_only_kernel[(2,)](
        chunk.target_logits, chunk.target_logits.stride(0), chunk.cu, chunk.temperature, chunk.seeds,
        chunk.positions, ws.row_max, ws.row_log_sum, ws.tau, ws.res_score, ws.res_index, out_ids,
        chunk.out_num, 1, 600, nvb, NVB=64, FALLBACK_BLOCK=128)
    assert torch.equal(out_ids, bonus), (out_ids, bonus)
    assert (bonus >= 0).all()


@pytest.mark.interpreter
def test_pruned_race_falls_back_when_no_weight_is_proven():
    """The pruned race reads a proven score of ``-inf`` as "every weight is 0" (an empty residual):
    no block races and the fallback race over the target row picks what the bonus race picks."""
    from kernels.row_stats import RACE_BEST_UNSET

    chunk, ws, out_ids, block, nvb = _bonus_chunk(42, 3)
    launch_residual_sample(ws, chunk, 3, has_draft=False, want_logprobs=False, race_block=block,
                           race_blocks=nvb, nvb_pow2=64, prune=True)
    bonus = out_ids.clone()
    ws.done[6:9].fill_(RACE_BEST_UNSET.value)  # nothing proven
    ws.res_score.fill_(0.0)  # upper bounds that would make every block a candidate
    ws.res_index.fill_(12345)
    out_ids.fill_(-7)
    _pruned_emit_only_kernel[(3,)](
        chunk.target_logits, chunk.cu, chunk.temperature, chunk.seeds, chunk.positions, ws.row_max,
        ws.row_log_sum, ws.tau, ws.residual_logp, ws.res_score, ws.res_index, ws.done, out_ids, 1, 600, nvb,
        NVB=64, BLOCK=block)
    assert torch.equal(out_ids, bonus), (out_ids, bonus)
    assert (bonus >= 0).all()
