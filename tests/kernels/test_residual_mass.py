"""Block verification's pass 2 against float64: the residual masses ``Z_{i+1}`` themselves.

The coupled tests compare decisions, and a decision only moves where ``h = Z / (Z + 1 - p)`` crosses
its uniform, so a wrong scale of ``Z`` can hide there (v14: ``Z / 2`` in the 16-bit load structure
changed about 3 of 192 decisions in larger trial batches and none of the coupled tests'). This test
runs pass 1, the decide kernel's COMBINE stage and pass 2 as the driver's separate launches do, and
checks every computed draft row's ``Z`` (the sum of its block partials) against float64 at the
kernel's own ``p_i``, and ``p_i`` against the float64 clipped-ratio recursion. Rows COMBINE marks as
skipped (``log p_i = +inf``) must hold ``Z = 0`` and be skippable in float64: slot 0, ``eta_i > p_i``,
or a request whose last slot accepts (``eta_g <= p_g``). The single-launch path runs the
same pass-2 function (``residual_mass_block``) and is held to the separate launches bit for bit by
tests/kernels/test_fused_decide.py.

Tolerance: ``|Z - Z_64| <= Z_RTOL * Z_64 + Z_ATOL``. Each term is formed from logs in float32, so
its relative error is ~1e-6 except where ``p b`` and ``q`` nearly cancel, and such terms are a
small share of ``Z``; 1e-3 leaves ~100x room on these batches and is far inside any scale error
a kernel bug produces (``Z / 2``, ``Z = 0``, shifted rows).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from kernels.chunking import Workspace
from kernels.decide import launch_decide
from kernels.driver import ChunkTensors
from kernels.residual_mass import launch_residual_mass
from kernels.row_stats import launch_row_stats
from kernels.tuning import geometry
from reference import probs
from reference import rng as reference_rng
from tests.kernels._batches import DEVICE, INTERPRETING, make_batch

Z_RTOL, Z_ATOL = 1e-3, 1e-7
P_ATOL = 1e-4  # on p_i in [0, 1]: float32 statistics of the rows
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
if INTERPRETING or DEVICE.type != "cuda":
    VOCABS, REQUESTS = (300, 512), 4
else:
    VOCABS, REQUESTS = (32000, 151936, 262144), 24


def kernel_masses(batch):
    """``(log p_i, Z_{i+1})`` per draft slot from pass 1, COMBINE and pass 2 (float64 arrays)."""
    num_reqs, vocab = len(batch.lengths), batch.target_logits.shape[1]
    geo = geometry(vocab, num_reqs, max(batch.lengths) + 1)
    num_drafts = batch.draft_token_ids.shape[0]
    ws = Workspace.allocate(batch.target_logits.shape[0], num_drafts, num_reqs, geo.num_vblocks,
                            geo.race_blocks, DEVICE)
    out_ids = torch.full((num_reqs, max(batch.lengths) + 1), -7, dtype=torch.int64, device=DEVICE)
    out_num = torch.empty(num_reqs, dtype=torch.int32, device=DEVICE)
    chunk = ChunkTensors(*batch.args(), out_ids, out_num, None)
    launch_row_stats(ws, chunk.target_logits, chunk.draft_logits, chunk.cu, chunk.temperature, num_reqs,
                     geo.block_v)
    launch_decide(ws, chunk, num_reqs, block_method=True, has_draft=True, want_logprobs=False,
                  rows=geo.rows_pow2, nvb_pow2=geo.nvb_pow2, combine=True, decide=False)
    launch_residual_mass(ws, chunk, num_reqs, geo.block_v)
    z = ws.z_part[: num_drafts * geo.num_vblocks].view(num_drafts, geo.num_vblocks).double().sum(1)
    return ws.logp_before[:num_drafts].double().cpu().numpy(), z.cpu().numpy()


def float64_masses(batch, log_p):
    """``(log p_i, Z_{i+1})`` per draft slot in float64; ``Z`` is taken at the given ``log p`` (the
    kernel's), so that the two checks are independent."""
    as_np = lambda t: t.detach().float().cpu().numpy().astype(np.float64)
    target, draft = as_np(batch.target_logits), as_np(batch.draft_logits)
    ids = batch.draft_token_ids.cpu().numpy()
    lengths = np.asarray(batch.lengths)
    temp = probs.effective_temperature(batch.temperature.cpu().numpy().astype(np.float64))
    slot_req = np.repeat(np.arange(lengths.size), lengths)
    slot_row = np.arange(ids.size) + slot_req
    slot_j = np.arange(ids.size) - np.concatenate([[0], np.cumsum(lengths)])[slot_req]
    logb, b_mode, b_tail = probs.log_softmax_with_tails(target, np.repeat(temp, lengths + 1))
    logq, q_mode, q_tail = probs.log_softmax_with_tails(draft, temp[slot_req])
    b_x, q_x = probs.rescaled_pair(logb[slot_row, ids], logq[np.arange(ids.size), ids])
    p = np.ones(ids.size)
    for s in range(ids.size):
        if slot_j[s] > 0:
            p[s] = probs.clipped_ratio_step(p[s - 1], b_x[s - 1], q_x[s - 1])
    p_after = np.array([probs.clipped_ratio_step(p[s], b_x[s], q_x[s]) for s in range(ids.size)])
    masses_at = np.where(np.isfinite(log_p), log_p, 0.0)  # skipped rows: any p, their Z is not compared
    z = probs.residual_masses(np.exp(masses_at), np.exp(logb[slot_row]), b_mode[slot_row],
                              b_tail[slot_row], np.exp(logq), q_mode, q_tail)
    # Which rows the skip may leave out (kernels/decide.py): eta_s is the accept uniform of slot s - 1.
    metadata = (batch.seeds, batch.positions, batch.cu_num_draft_tokens)
    eta = reference_rng.accept_uniforms(*(t.cpu().numpy() for t in metadata))
    last = np.concatenate([[0], np.cumsum(lengths)])[slot_req + 1] - 1  # each slot's request's last slot
    eta_before = np.concatenate([[1.0], eta[:-1]])
    skippable = (slot_j == 0) | (eta_before > p) | (eta[last] <= p_after[last])
    with np.errstate(divide="ignore"):
        return np.log(p), z, skippable


def every_mass_wanted(batch):
    """A copy whose draft tokens keep every slot's ``Z`` needed: ``x`` maximises ``b / q`` on the
    slots before the last (so ``p_i = 1 >= eta_i``) and minimises it on the last (so ``eta_g > p_g``
    almost surely). The natural batches leave few computed rows: the skip takes most of them."""
    target = batch.target_logits.float().cpu().numpy()
    draft = batch.draft_logits.float().cpu().numpy()
    ids = batch.draft_token_ids.cpu().numpy().copy()
    slot = 0
    for r, k in enumerate(batch.lengths):
        for j in range(k):
            gap = target[slot + r] - draft[slot]  # log (b / q) up to a constant and 1 / T
            if j == k - 1:
                ids[slot] = np.argmin(np.where(np.isnan(gap), np.inf, gap))
            else:
                ids[slot] = np.argmax(np.where(np.isnan(gap), -np.inf, gap))
            slot += 1
    forced = batch.clone()
    forced.draft_token_ids = torch.tensor(ids, device=batch.draft_token_ids.device)
    return forced


@pytest.mark.interpreter
@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_residual_masses_match_float64(vocab, dtype):
    master = int(os.environ.get("SPECFUZZ_SEED", "20261202"))
    print(f"master seed {master} (set SPECFUZZ_SEED to change)")
    rng = np.random.default_rng([master, vocab, DTYPES.index(dtype)])
    sampled = with_mass = skipped = 0
    for family in ("near", "normal", "peaked", "shared"):
        seed = int(rng.integers(2**32))
        print(f"seed {seed} family {family} V {vocab} {dtype}")
        natural = make_batch(seed, num_reqs=REQUESTS, max_k=4, vocab=vocab, dtype=dtype, family=family,
                             greedy_fraction=0.2)
        if not natural.draft_token_ids.numel():
            continue
        for batch in (natural, every_mass_wanted(natural)):
            sampled, with_mass, skipped = np.add((sampled, with_mass, skipped),
                                                 check_masses(batch, f"seed {seed} family {family}"))
    # Power: a scale error of Z (Z / 2 moved no coupled decision) must be visible on these rows, and
    # the skip must have been exercised.
    assert sampled >= 4 and with_mass >= 2, ("too few computed rows with a residual mass", sampled, with_mass)
    assert skipped >= 2, ("too few skipped rows", skipped)


def check_masses(batch, context):
    """Checks one batch (module docstring); returns its counts of computed rows, computed rows with a
    mass above 1e-3 and skipped rows."""
    log_p, z = kernel_masses(batch)
    log_p64, z64, skippable = float64_masses(batch, log_p)
    sampled_rows = np.repeat(batch.temperature.cpu().numpy() > 0, batch.lengths)
    skip = sampled_rows & (log_p == np.inf)
    live = sampled_rows & ~skip
    context += f" V {batch.target_logits.shape[1]} {batch.target_logits.dtype}"
    assert np.all(z[~live] == 0.0), (context, "greedy and skipped rows must write Z = 0", z[~live])
    assert np.all(skippable[skip]), (context, "a skipped row whose Z can decide tau",
                                     np.flatnonzero(skip & ~skippable))
    np.testing.assert_allclose(np.exp(log_p[live]), np.exp(log_p64[live]), rtol=0, atol=P_ATOL,
                               err_msg=context + " p_i")
    error = np.abs(z[live] - z64[live])
    worst = int(np.argmax(error - Z_RTOL * z64[live])) if live.any() else 0
    print(f"  {int(live.sum())} computed rows ({int(skip.sum())} skipped), "
          "worst |Z - Z64| / (Z_RTOL Z64 + Z_ATOL) = "
          f"{np.max(error / (Z_RTOL * z64[live] + Z_ATOL), initial=0.0):.3g}")
    assert np.all(error <= Z_RTOL * z64[live] + Z_ATOL), (
        context, "Z", z[live][worst], z64[live][worst])
    return int(live.sum()), int(np.sum(z64[live] > 1e-3)), int(skip.sum())
