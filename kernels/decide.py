"""Per-request decisions: one program per request, sequential over its draft slots.

It combines the pass-1 block statistics of the request's rows into per-row ``max`` / ``log sum``
(and the greedy argmax), gathers ``b(x)`` and ``q(x)`` of every draft token, draws the accept
uniforms and decides (docs/interfaces.md section 2):

- greedy rows: accept while ``x == argmax`` (lowest index on ties), emit the argmax of the first
  mismatching row (or of the bonus row);
- token: accept while ``u * q(x) < b(x)``, evaluated as ``log u + log q(x) < log b(x)``; the
  correction is sampled later from ``(b - q)_+``;
- block (SPEC.md section 2): ``log p_i = min(log p_{i-1} + log b(x_i) - log q(x_i), 0)`` clipped at
  every step, ``h_i = Z_{i+1} / (Z_{i+1} + 1 - p_i)`` (1 when the denominator is 0), ``h_g = p_g``,
  ``tau = max{i : eta_i <= h_i}`` scanning every position; the residual ``(p_tau b - q)_+`` is
  sampled later. With draft logits ``Z`` needs a second pass over the rows, so the kernel runs in two
  stages: ``COMBINE`` (statistics and ``log p`` per slot, stored for the residual-mass pass) and
  ``DECIDE`` (reads ``Z`` and decides). Otherwise one launch does both. ``COMBINE`` also marks the
  slots whose ``Z`` cannot change tau, and pass 2 skips their rows: slot 0 (``Z_1`` enters no
  ``h``), every slot with ``eta_s > p_s`` (``h_s <= p_s``), and all of them when ``eta_g <= p_g``
  (then tau = g). Both tests keep a margin (``MASS_SKIP_MARGIN``) far wider than
  float32's error in ``h`` and ``p``, so a skipped slot is one the unskipped kernel rejects too.

A rejection whose target and draft rows are near one-hot on a shared mode beyond float32's tails
(kernels/deep_tails.py) gets its correction here, from a sequential race over the row, and its
race counter is set so that the sampling pass leaves it alone.

It writes the whole output row (accepted drafts, greedy emission, ``-1`` padding), ``num_emitted``,
logprobs of accepted drafts (``0.0`` padding), and for sampled requests ``tau`` and ``log p_tau`` for
the sampling pass. A draft id outside ``[0, V)`` (``-1`` padding) counts as a token of target
probability 0: it is never accepted.
"""

from __future__ import annotations

import kernels._device
import triton
import triton.language as tl

from kernels import dependent_launch, tuning
from kernels.dependent_launch import let_next_start, wait_for_previous
from kernels.deep_tails import CLAIMED, DEEP_BLOCK, deep_tail_race, is_deep
from kernels.fastmath import LOG2E, log1p, one_minus_exp2
from kernels.launch import launch_jit
from kernels.randomness import ACCEPT_STREAM, philox_uniform
from kernels.row_stats import inverse_temperature, log_prob, request_span

NEG_INF = tl.constexpr(float("-inf"))
# COMBINE stores ``log p_s = +inf`` for a slot whose ``Z_{s+1}`` cannot move tau (residual_mass.py
# skips its rows). The margin (log units) keeps the skip clear of float32 rounding: decide's own
# ``h_s`` and ``p_g`` are within ~1e-5 relative of the values the skip test bounds them by.
MASS_SKIPPED = tl.constexpr(float("inf"))
MASS_SKIP_MARGIN = tl.constexpr(2.0**-7)


@triton.jit
def clipped_log_ratio_step(log_p, log_b, log_q):
    """``log min(p * b / q, 1)``; ``p == 0`` or ``b == 0`` stays 0 even if ``q == 0``;
    ``q == 0 < b`` gives 1."""
    stepped = tl.minimum(log_p + (log_b - log_q), 0.0)
    stepped = tl.where(log_q == NEG_INF, 0.0, stepped)
    return tl.where((log_p == NEG_INF) | (log_b == NEG_INF), NEG_INF, stepped)


@triton.jit
def _combine_row_stats(blk_max_ptr, blk_tail_ptr, first_row, num_rows, num_vblocks, inv_t,
                       ROWS: tl.constexpr, NVB: tl.constexpr, CACHE: tl.constexpr):
    """Row max, log sum exp at ``inv_t`` and the first block attaining the max (``NVB`` if none: an
    all-NaN row) of ``num_rows`` rows from block partials (``CACHE``: the loads' cache modifier,
    ``.cg`` when other programs of this launch wrote them).

    The log sum is ``log1p(tail)``: the first max block adds its tail, every other block its full
    sum, so the row max's own 1 is never added to a tail it would swallow."""
    rows = tl.arange(0, ROWS)
    vbs = tl.arange(0, NVB)
    mask = (rows < num_rows)[:, None] & (vbs < num_vblocks)[None, :]
    offs = (first_row + rows)[:, None] * num_vblocks + vbs[None, :]
    blk_max = tl.load(blk_max_ptr + offs, mask=mask, other=NEG_INF, cache_modifier=CACHE)
    blk_tail = tl.load(blk_tail_ptr + offs, mask=mask, other=-1.0, cache_modifier=CACHE)
    row_max = tl.max(blk_max, axis=1)
    rescale = tl.where(blk_max == NEG_INF, 0.0, tl.exp((blk_max - row_max[:, None]) * inv_t))
    first_best = tl.min(tl.where(blk_max == row_max[:, None], vbs[None, :], NVB), axis=1)
    at_first = vbs[None, :] == first_best[:, None]
    row_tail = tl.sum(tl.where(at_first, blk_tail, (blk_tail + 1.0) * rescale), axis=1)
    row_log_sum = log1p(row_tail)
    return row_max, row_log_sum, first_best


# Columns a step of a one-row scan: 8 a thread at 8 warps; under the interpreter a quarter of its
# 256-wide blocks, so the tests take the scan through several steps and its early stop.
GREEDY_SCAN = tl.constexpr(64 if kernels._device.INTERPRETING else 2048)


@triton.jit
def _lowest_max_column(row_ptr, start, row_max, vocab_size, none, MODE_BLOCK: tl.constexpr):
    """The lowest column in ``[start, start + MODE_BLOCK)`` (and below ``vocab_size``) of the row at
    ``row_ptr`` whose logit equals ``row_max``; ``none`` (above every such column) if none does. NaN
    never equals the max. Steps of ``GREEDY_SCAN`` columns; the scan stops at the first step with a
    hit, since later steps only hold higher columns.

    One row at a time, not a ``[rows, columns]`` tile: decide's registers are set by its widest
    path, and a ``[16, 512]`` tile here took the whole kernel to ~125 registers (sm_90, offline)
    where it needs ~60 without the scan, halving the decide programs an SM holds (v25 log)."""
    SCAN: tl.constexpr = MODE_BLOCK if MODE_BLOCK < GREEDY_SCAN else GREEDY_SCAN
    found = none
    offset = 0
    while (offset < MODE_BLOCK) & (found == none):
        cols = start + offset + tl.arange(0, SCAN)
        inside = cols < vocab_size
        x = tl.load(row_ptr + cols, mask=inside, other=NEG_INF).to(tl.float32)
        found = tl.min(tl.where(inside & (x == row_max), cols, none), axis=0)
        offset += SCAN
    return found


@triton.jit
def _greedy_argmax(target_ptr, target_stride, first_row, num_rows, first_block, row_max, vocab_size,
                   ROWS: tl.constexpr, MODE_BLOCK: tl.constexpr):
    """For each of the first ``num_rows`` rows from ``first_row``: the lowest column holding its max
    ``row_max``, read from its first pass-1 block attaining it (``first_block``; ``MODE_BLOCK`` = that
    pass's block width); 0 where no column does (an all-NaN row). NaN never equals the max (pass 1's
    max ignores NaN), so this is the lowest index of the largest non-NaN logit, and of an all
    ``-inf`` row its first column. Rows from ``num_rows`` on get -1, which no draft id equals."""
    rows = tl.arange(0, ROWS)
    none = vocab_size + MODE_BLOCK  # above every column a scan can name
    arg = tl.where(rows < num_rows, 0, -1)
    for r in range(0, num_rows):
        row_ptr = target_ptr + (first_row + r).to(tl.int64) * target_stride
        found = _lowest_max_column(row_ptr, _pick(first_block, rows, r) * MODE_BLOCK, _pick(row_max, rows, r),
                                   vocab_size, none, MODE_BLOCK)
        arg = tl.where(rows == r, tl.where(found == none, 0, found), arg)
    return arg


@triton.jit
def _row_mode(row_ptr, blk_max_ptr, stat_row, num_vblocks, vocab_size, row_max, NVB: tl.constexpr,
              MODE_BLOCK: tl.constexpr, CACHE: tl.constexpr):
    """Lowest column holding ``row_max``, read from the row's first pass-1 block whose max it is
    (``MODE_BLOCK`` = that pass's block width); ``vocab_size`` if none."""
    vbs = tl.arange(0, NVB)
    blk_max = tl.load(blk_max_ptr + stat_row * num_vblocks + vbs, mask=vbs < num_vblocks, other=NEG_INF,
                      cache_modifier=CACHE)
    first = tl.min(tl.where(blk_max == row_max, vbs, NVB), axis=0)
    return _lowest_max_column(row_ptr, first * MODE_BLOCK, row_max, vocab_size, vocab_size, MODE_BLOCK)


@triton.jit
def _pick(values, rows, index):
    """``values[index]`` of a small register vector (0 when out of range)."""
    return tl.sum(tl.where(rows == index, values, 0), axis=0)


# Pointers of decide_request read as scalars or small tiles: no alignment specialisation.
DECIDE_POINTERS = ("draft_ids_ptr", "cu_ptr", "temperature_ptr", "seeds_ptr", "positions_ptr", "blk_max_ptr",
                   "blk_tail_ptr", "blk_arg_ptr", "row_max_ptr", "row_log_sum_ptr", "row_arg_ptr",
                   "logp_before_ptr", "z_part_ptr", "tau_ptr", "residual_logp_ptr", "done_ptr",
                   "out_ids_ptr", "out_num_ptr", "out_logprobs_ptr")


@triton.jit
def decide_request(req, num_reqs, target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr, cu_ptr,
                   temperature_ptr, seeds_ptr, positions_ptr,
                   blk_max_ptr, blk_tail_ptr, blk_arg_ptr, row_max_ptr, row_log_sum_ptr, row_arg_ptr,
                   logp_before_ptr, z_part_ptr, tau_ptr, residual_logp_ptr, done_ptr,
                   out_ids_ptr, out_num_ptr, out_logprobs_ptr, out_width,
                   num_target_rows, vocab_size, num_vblocks,
                   BLOCK_METHOD: tl.constexpr, HAS_DRAFT: tl.constexpr, COMBINE: tl.constexpr,
                   DECIDE: tl.constexpr, WANT_LOGPROBS: tl.constexpr,
                   ROWS: tl.constexpr, NVB: tl.constexpr, MODE_BLOCK: tl.constexpr, CACHE: tl.constexpr,
                   PDL: tl.constexpr):
    """The decisions of request ``req`` of ``num_reqs`` (the module docstring): the body of the decide
    kernel, and of the fused launches of ``kernels/fused_decide.py``, whose ``CACHE`` is ``.cg``
    because the statistics it reads were written by other programs of the same launch. ``PDL``: a
    dependent launch (kernels/dependent_launch.py): what depends only on the call's inputs (the draft
    tokens' logits, the accept uniforms) is loaded before the wait, the statistics after it."""
    draft_row0, k = request_span(cu_ptr, req, num_target_rows - num_reqs, out_width - 1)
    target_row0 = draft_row0 + req
    temperature = tl.load(temperature_ptr + req).to(tl.float32)
    greedy = ~(temperature > 0)
    inv_t = inverse_temperature(temperature)
    rows = tl.arange(0, ROWS)
    slot = rows < k
    t_stat = target_row0 + rows
    q_stat = num_target_rows + draft_row0 + rows

    # The draft tokens' logits and the accept uniforms (eta for block).
    x = tl.load(draft_ids_ptr + draft_row0 + rows, mask=slot, other=-1).to(tl.int64)
    x_ok = slot & (x >= 0) & (x < vocab_size)
    x_safe = tl.where(x_ok, x, 0)
    t_x = tl.load(target_ptr + (target_row0 + rows).to(tl.int64) * target_stride + x_safe, mask=x_ok,
                  other=0.0).to(tl.float32)
    if HAS_DRAFT:
        d_x = tl.load(draft_ptr + (draft_row0 + rows).to(tl.int64) * draft_stride + x_safe, mask=x_ok,
                      other=0.0).to(tl.float32)
    seed = tl.load(seeds_ptr + req)
    position0 = tl.load(positions_ptr + req)
    u = philox_uniform(seed, rows * 0, position0 + rows, ACCEPT_STREAM)
    wait_for_previous(PDL)

    if COMBINE:
        t_max, t_log_sum, t_first = _combine_row_stats(blk_max_ptr, blk_tail_ptr, target_row0,
                                                       k + 1, num_vblocks, inv_t, ROWS, NVB, CACHE)
        t_arg = rows * 0
        if greedy:  # the argmax is read from the logits (pass 1 keeps none: kernels/row_stats.py)
            # Slot s is accepted only if its draft holds the row max (or is column 0, an all-NaN
            # row's argmax), so tau is at most the first slot whose draft does not: rows after it
            # need no argmax (their -1 matches no draft id).
            may_accept = x_ok & ((t_x == t_max) | (x == 0))
            scanned = tl.min(tl.where(slot & ~may_accept, rows, k), axis=0) + 1
            t_arg = _greedy_argmax(target_ptr, target_stride, target_row0, scanned, t_first, t_max,
                                   vocab_size, ROWS, MODE_BLOCK)
        tl.store(row_max_ptr + t_stat, t_max, mask=rows <= k)
        tl.store(row_log_sum_ptr + t_stat, t_log_sum, mask=rows <= k)
        tl.store(row_arg_ptr + t_stat, t_arg, mask=rows <= k)
        if HAS_DRAFT:
            q_max, q_log_sum, _ = _combine_row_stats(blk_max_ptr, blk_tail_ptr,
                                                     num_target_rows + draft_row0, k, num_vblocks, inv_t,
                                                     ROWS, NVB, CACHE)
            tl.store(row_max_ptr + q_stat, q_max, mask=slot)
            tl.store(row_log_sum_ptr + q_stat, q_log_sum, mask=slot)
    else:
        t_max = tl.load(row_max_ptr + t_stat, mask=rows <= k, other=0.0, cache_modifier=CACHE)
        t_log_sum = tl.load(row_log_sum_ptr + t_stat, mask=rows <= k, other=0.0, cache_modifier=CACHE)
        t_arg = tl.load(row_arg_ptr + t_stat, mask=rows <= k, other=0, cache_modifier=CACHE)
        if HAS_DRAFT:
            q_max = tl.load(row_max_ptr + q_stat, mask=slot, other=0.0, cache_modifier=CACHE)
            q_log_sum = tl.load(row_log_sum_ptr + q_stat, mask=slot, other=0.0, cache_modifier=CACHE)

    # b(x) and q(x) of every draft token.
    log_b = tl.where(x_ok, log_prob(t_x, t_max, inv_t, t_log_sum), NEG_INF)
    if HAS_DRAFT:
        log_q = tl.where(x_ok, log_prob(d_x, q_max, inv_t, q_log_sum), 0.0)
    else:
        log_q = tl.zeros((ROWS,), tl.float32)  # point mass: q(x) = 1

    # u * q(x) < b(x) in log space: at tiny temperatures both probabilities underflow float32.
    token_accept = tl.log(u) + log_q < log_b
    accepted = tl.where(greedy, x_ok & (x == t_arg), token_accept)
    tau = tl.min(tl.where(slot & ~accepted, rows, k), axis=0)
    residual_logp = tau.to(tl.float32) * 0.0

    if BLOCK_METHOD:
        if HAS_DRAFT and DECIDE:
            vbs = tl.arange(0, NVB)
            z_offs = (draft_row0 + rows)[:, None] * num_vblocks + vbs[None, :]
            # from slot 1 on: Z_1 enters no h, and one-stage launches (at most one draft) write no Z
            z_mask = (slot & (rows >= 1))[:, None] & (vbs < num_vblocks)[None, :]
            z = tl.sum(tl.load(z_part_ptr + z_offs, mask=z_mask, other=0.0, cache_modifier=CACHE), axis=1)
        log_p = residual_logp  # log p_0 = 0
        logp_before = tl.zeros((ROWS,), tl.float32)
        mass_wanted = rows < 0
        block_tau = tau * 0
        for s in range(0, k):
            lb_s = _pick(log_b, rows, s)
            logp_before = tl.where(rows == s, log_p, logp_before)
            if not DECIDE:
                # h_s <= p_s (Z_{s+1} <= p_s), so eta_s > p_s rejects slot s whatever Z_{s+1} is.
                cannot_pass = tl.log(_pick(u, rows, s - 1)) > log_p + MASS_SKIP_MARGIN
                mass_wanted = tl.where(rows == s, (s >= 1) & ~cannot_pass, mass_wanted)
            if DECIDE:
                # 1 - p and 1 - b(x) from their logs: both can lie below float32's epsilon.
                one_minus_p = one_minus_exp2(log_p * LOG2E)
                if HAS_DRAFT:
                    mass = _pick(z, rows, s)  # Z_{s+1}
                else:
                    mass = tl.exp(log_p) * one_minus_exp2(lb_s * LOG2E)
                denominator = mass + one_minus_p
                h = tl.where(denominator > 0, mass / tl.where(denominator > 0, denominator, 1.0), 1.0)
                eta = _pick(u, rows, s - 1)
                block_tau = tl.where((s >= 1) & (eta <= h), s, block_tau)
            log_p = clipped_log_ratio_step(log_p, lb_s, _pick(log_q, rows, s))
        if DECIDE:
            eta_last = _pick(u, rows, k - 1)
            block_tau = tl.where((k >= 1) & (eta_last <= tl.exp(log_p)), k, block_tau)
            tau = tl.where(greedy, tau, block_tau)
            residual_logp = tl.where(tau < k, _pick(logp_before, rows, tau), 0.0)
        else:
            # h_g = p_g needs no Z: eta_g <= p_g makes tau = g, so no slot's mass can matter.
            all_accepted = (k >= 1) & (tl.log(_pick(u, rows, k - 1)) + MASS_SKIP_MARGIN < log_p)
            mass_wanted = mass_wanted & ~all_accepted
            tl.store(logp_before_ptr + draft_row0 + rows, tl.where(mass_wanted, logp_before, MASS_SKIPPED),
                     mask=slot)

    if DECIDE:
        ids = tl.where(rows < tau, x, -1)
        # Clamped: on the GPU an all-NaN row's block argmax can name a masked lane (found by fuzzing, V=1).
        arg = tl.minimum(tl.maximum(_pick(t_arg, rows, tau), 0), vocab_size - 1)
        greedy_emit = tl.where(rows == tau, arg.to(tl.int64), ids)
        ids = tl.where(greedy, greedy_emit, ids)
        out_row = req.to(tl.int64) * out_width
        tl.store(out_ids_ptr + out_row + rows, ids, mask=rows < out_width)
        tl.store(out_num_ptr + req, (tau + 1).to(tl.int32))
        if WANT_LOGPROBS:
            logprobs = tl.where(rows < tau, log_b, 0.0)
            greedy_logprobs = tl.where(rows == tau, -_pick(t_log_sum, rows, tau), logprobs)
            logprobs = tl.where(greedy, greedy_logprobs, logprobs)
            tl.store(out_logprobs_ptr + out_row + rows, logprobs, mask=rows < out_width)
        tl.store(tau_ptr + req, tau)
        tl.store(residual_logp_ptr + req, residual_logp)
        if HAS_DRAFT:  # a correction the race's float32 tails would get wrong (kernels/deep_tails.py)
            t_log_sum_tau = _pick(t_log_sum, rows, tau)
            q_log_sum_tau = _pick(q_log_sum, rows, tau)
            t_max_tau = _pick(t_max, rows, tau)
            q_max_tau = _pick(q_max, rows, tau)
            target_row = target_row0 + tau
            t_row_ptr = target_ptr + target_row.to(tl.int64) * target_stride
            q_row_ptr = draft_ptr + (draft_row0 + tau).to(tl.int64) * draft_stride
            shared_mode = tau < 0  # False, typed as the comparison below
            if ~greedy & (tau < k) & is_deep(t_log_sum_tau, q_log_sum_tau):
                # Deep tails (< 2^-64) mean each row's mode is unique (a second max lane would add 1),
                # so the modes coincide iff the draft row holds its max at the target's mode.
                t_mode = _row_mode(t_row_ptr, blk_max_ptr, target_row, num_vblocks, vocab_size, t_max_tau,
                                   NVB, MODE_BLOCK, CACHE)
                in_row = t_mode < vocab_size
                x_mode = tl.load(q_row_ptr + tl.where(in_row, t_mode, 0), mask=in_row, other=NEG_INF)
                shared_mode = in_row & (x_mode.to(tl.float32) == q_max_tau)
            if shared_mode:
                best, token = deep_tail_race(
                    target_ptr, draft_ptr, target_stride, draft_stride, target_row, draft_row0 + tau,
                    vocab_size, t_max_tau, t_log_sum_tau, q_max_tau, q_log_sum_tau, inv_t,
                    residual_logp * LOG2E, seed, position0 + tau, DEEP_BLOCK)
                if best > NEG_INF:  # else the race kernel runs, and its empty-residual fallback
                    tl.store(out_ids_ptr + out_row + tau, token.to(tl.int64))
                    if WANT_LOGPROBS:
                        x_token = tl.load(t_row_ptr + token).to(tl.float32)
                        logprob = log_prob(x_token, t_max_tau, inv_t, t_log_sum_tau)
                        tl.store(out_logprobs_ptr + out_row + tau, logprob)
                    tl.store(done_ptr + req, CLAIMED)  # the race never completes this request


@launch_jit(
    counts=("out_width", "num_target_rows", "vocab_size", "num_vblocks"),
    small_pointers=DECIDE_POINTERS)
def _decide_kernel(target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr, cu_ptr,
                   temperature_ptr, seeds_ptr, positions_ptr,
                   blk_max_ptr, blk_tail_ptr, blk_arg_ptr, row_max_ptr, row_log_sum_ptr, row_arg_ptr,
                   logp_before_ptr, z_part_ptr, tau_ptr, residual_logp_ptr, done_ptr,
                   out_ids_ptr, out_num_ptr, out_logprobs_ptr, out_width,
                   num_target_rows, vocab_size, num_vblocks,
                   BLOCK_METHOD: tl.constexpr, HAS_DRAFT: tl.constexpr, COMBINE: tl.constexpr,
                   DECIDE: tl.constexpr, WANT_LOGPROBS: tl.constexpr,
                   ROWS: tl.constexpr, NVB: tl.constexpr, MODE_BLOCK: tl.constexpr, PDL: tl.constexpr):
    let_next_start(PDL)
    decide_request(tl.program_id(0), tl.num_programs(0), target_ptr, draft_ptr, target_stride, draft_stride,
                   draft_ids_ptr, cu_ptr, temperature_ptr, seeds_ptr, positions_ptr,
                   blk_max_ptr, blk_tail_ptr, blk_arg_ptr, row_max_ptr, row_log_sum_ptr, row_arg_ptr,
                   logp_before_ptr, z_part_ptr, tau_ptr, residual_logp_ptr, done_ptr,
                   out_ids_ptr, out_num_ptr, out_logprobs_ptr, out_width, num_target_rows, vocab_size,
                   num_vblocks, BLOCK_METHOD, HAS_DRAFT, COMBINE, DECIDE, WANT_LOGPROBS, ROWS, NVB,
                   MODE_BLOCK, "", PDL)


def launch_decide(ws, batch, num_reqs, *, block_method, has_draft, combine, decide, want_logprobs, rows,
                  nvb_pow2, pdl=False):
    """One program per request of the chunk; see the module docstring for the two stages. ``pdl``: a
    dependent launch (kernels/dependent_launch.py)."""
    mode_block = pass1_block_width(batch.target_logits.shape[1], ws.num_vblocks)
    draft = batch.draft_logits if has_draft else batch.target_logits
    _decide_kernel[(num_reqs,)](
        batch.target_logits, draft, batch.target_logits.stride(0), draft.stride(0),
        *decide_arguments(ws, batch, want_logprobs),
        BLOCK_METHOD=block_method, HAS_DRAFT=has_draft, COMBINE=combine, DECIDE=decide,
        WANT_LOGPROBS=want_logprobs, ROWS=rows, NVB=nvb_pow2, MODE_BLOCK=mode_block,
        num_warps=decide_warps(mode_block), variant=batch.variant, **dependent_launch.options(pdl),
    )


def decide_arguments(ws, batch, want_logprobs: bool) -> tuple:
    """``decide_request``'s runtime arguments after the logit pointers and strides, in its order: the
    decide kernel and the fused launches (kernels/fused_decide.py) pass the same list."""
    out_logprobs = batch.out_logprobs if want_logprobs else batch.out_num
    return (batch.draft_token_ids, batch.cu, batch.temperature, batch.seeds, batch.positions,
            ws.blk_max, ws.blk_tail, ws.blk_arg, ws.row_max, ws.row_log_sum, ws.row_arg,
            ws.logp_before, ws.z_part, ws.tau, ws.residual_logp, ws.done,
            batch.out_ids, batch.out_num, out_logprobs, batch.out_ids.shape[1],
            batch.target_logits.shape[0], batch.target_logits.shape[1], ws.num_vblocks)


def pass1_block_width(vocab_size: int, num_vblocks: int) -> int:
    """Pass 1's block width from its block count. In plain ints: ``triton.cdiv`` / ``next_power_of_2``
    are constexpr-function wrappers in recent Triton, ~5 us of host time each per call (triton 3.9)."""
    return 1 << (-(-vocab_size // num_vblocks) - 1).bit_length()


def decide_warps(block_v: int) -> int:
    """Warps of every launch that runs ``decide_request``: pass 1's, so that the decide kernel and the
    fused launches (kernels/fused_decide.py) lay out, and so round, its reductions the same way."""
    return tuning.stats_warps(block_v)
