"""Sampling the correction or bonus token: split-vocabulary Gumbel/exponential race plus a combine.

For each sampled request, with ``tau`` and ``log p_tau`` from the decide kernel, the weights over
target row ``tau`` (docs/interfaces.md sections 1-2) are

- bonus (``tau == k``):            ``w = b_{k+1}``;
- with draft logits:               ``w = (p_tau * b - q)_+`` (token verification: ``p_tau = 1``);
- point-mass draft:                ``w = b`` with the rejected draft token zeroed;

and ``Y = argmax_v (log w_v - log E_v)``, ties to the lowest index, ``E_v = -log1p(-u_v)`` from row
``tau``'s sampling uniforms, evaluated in log2 units with hardware ``log2``/``exp2`` approximations
(``kernels.fastmath``): the race is ALU-bound, and accurate logs and divisions doubled its cost (181
vs 89 SASS instructions per element; 831 vs 424 us for 512 x 262144 on the H200) for score
differences below 1e-5. Pass A (``(request, vocab block)`` programs) keeps each block's best
score and index; pass B, run by whichever of a request's pass-A programs finishes last (an atomic
counter per request; same launch), picks the lowest-index winner, writes the token and, when asked,
its logprob under row ``tau``. If every ``w_v`` is 0 (an empty residual float
rounding can produce), pass B runs the documented fallback itself: the same race over ``b`` (a
sequential loop over the row: rare, so kept off the hot pass). Greedy requests are skipped (the
decide kernel already wrote their output) and their programs do nothing. The race is ALU-bound (one
Philox per element), so the block size shrinks when there are few requests, to spread one row over
more programs.

The hot path is kept short (v9; sm_90 SASS of a bf16 rejection block, 4096 x 8 warps: 77 -> 69
instructions per element): blocks inside the row load without a mask, a bonus row skips the draft
load and the positive part (a program-wide branch), ``log p_tau`` is folded into the row's log sum,
scores are NaN-free by construction instead of by an extra select, one reduction gives the best score
and its lowest index, and bf16 is widened by a shift (``row_stats.widen``).

Large chunks prune (v21, ``tuning.race_prune``): each block stores bounds of its best score instead
of racing (``_block_bounds``: ``log2 u`` stands in for ``log2 E``), and the request's last block
races exactly, with the code above, only the blocks whose upper bound reaches the best lower bound
(``_race_candidates``), about one per request. The results are the same bit for bit; the time saved
is small (docs/kernels-log.md, v21), because the Philox words, which the bounds still need for every
column, are a large part of the race.
"""

from __future__ import annotations

import kernels._device  # noqa: F401
import triton
import triton.language as tl

from kernels import dependent_launch, tuning
from kernels.dependent_launch import let_next_start, wait_for_previous
from kernels.fastmath import fast_log2, one_minus_exp2_negative
from kernels.launch import launch_jit
from kernels.randomness import (SAMPLE_STREAM, log2_exponential_from_uniform, philox_words,
                                sampling_uniforms_block, uniform_from_bits)
from kernels.row_stats import inverse_temperature, log2_prob, log_prob, request_span, widen

NEG_INF = tl.constexpr(float("-inf"))
# The pruned race: PRUNE_* make ``score_slack``.
PRUNE_MARGIN = tl.constexpr(2.0 ** -10)
PRUNE_RELATIVE = tl.constexpr(2.0 ** -18)
FLT_MAX = tl.constexpr(3.4028234663852886e38)


@triton.jit
def _no_nan(score):
    """``score`` with NaN replaced by ``-inf``: one ``max`` (``maxNum`` semantics, as in the
    interpreter's ``np.fmax``: a NaN operand yields the other one)."""
    return tl.maximum(score, NEG_INF)


@triton.jit
def log2_positive_part(a, log_q):
    """``log2 (2^a - 2^log_q)_+`` (``-inf`` where ``log_q >= a`` or either is NaN), all in log2 units.

    ``a + log2(1 - 2^gap)`` with ``gap`` the excess of ``log_q`` over ``a``; for ``gap > -1/8`` the
    factor ``1 - 2^gap`` is a cubic fit (``fastmath.one_minus_exp2_negative``), so
    near-equal ``p b`` and ``q`` keep the resolution their float32 inputs carry, and tiny residuals
    never cancel to 0 in ``2^a``. ``gap >= 0`` makes that factor ``-0`` or negative (log2: ``-inf``
    or NaN), and the final ``max`` maps NaN to ``-inf`` (``_no_nan``).
    """
    return _no_nan(a + fast_log2(one_minus_exp2_negative(log_q - a)))


@triton.jit
def _race_uniforms(seed, first_col, position, BLOCK: tl.constexpr):
    """The sampling uniforms of columns ``first_col + [0, BLOCK)`` of the raced row."""
    return sampling_uniforms_block(seed, first_col, position, SAMPLE_STREAM, BLOCK)


@triton.jit
def _log2_noise(seed, first_col, position, BLOCK: tl.constexpr):
    """``log2 E`` of columns ``first_col + [0, BLOCK)``. Each branch of the race computes it after its
    loads: hoisted above them (common code of both branches), it stayed live across the branch and
    raised the race kernel from ~77 to ~95 registers (sm_90, offline)."""
    return log2_exponential_from_uniform(_race_uniforms(seed, first_col, position, BLOCK))


@triton.jit
def _target_race_scores(target_ptr, target_stride, target_row, first_col, vocab_size, live, row_max, inv_t,
                        row_log_sum, seed, position, BLOCK: tl.constexpr):
    """``log2 b_v - log2 E_v`` over columns ``first_col + [0, BLOCK)`` of a target row (``-inf``
    outside ``live``): the empty-residual fallback's loop."""
    cols = first_col + tl.arange(0, BLOCK)
    xt = widen(tl.load(target_ptr + target_row.to(tl.int64) * target_stride + cols, mask=live, other=NEG_INF))
    return _no_nan(log2_prob(xt, row_max, inv_t, row_log_sum) - _log2_noise(seed, first_col, position, BLOCK))


@triton.jit
def _load_block(row_ptr, cols, vocab_size, FULL: tl.constexpr):
    """One block of a logit row as float32; ``FULL``: the block lies inside the row (no mask, so
    no -inf fill)."""
    if FULL:
        return widen(tl.load(row_ptr + cols))
    else:
        return widen(tl.load(row_ptr + cols, mask=cols < vocab_size, other=NEG_INF))


@triton.jit
def _block_race(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t, a_log_sum, q_max, q_log_sum,
                rejected, excluded, seed, position, HAS_DRAFT: tl.constexpr, FULL: tl.constexpr,
                BLOCK: tl.constexpr):
    """Best score and its lowest index (block-relative) of one block of a sampled request's race.

    ``a_log_sum`` is the target row's log sum minus ``log p_tau`` (natural log), so that
    ``a = log2 (p_tau b)`` costs no extra operation per element. Scores are never NaN: the positive
    part is ``-inf`` wherever an operand is NaN, and ``log2 E`` is finite.
    """
    cols = first_col + tl.arange(0, BLOCK)
    xt = _load_block(t_row_ptr, cols, vocab_size, FULL)
    if HAS_DRAFT:
        if rejected:
            xd = _load_block(q_row_ptr, cols, vocab_size, FULL)
            log_e = _log2_noise(seed, first_col, position, BLOCK)
            a = log2_prob(xt, row_max, inv_t, a_log_sum)  # log2 (p_tau b)
            scores = log2_positive_part(a, log2_prob(xd, q_max, inv_t, q_log_sum)) - log_e
        else:  # bonus: the target row itself
            log_e = _log2_noise(seed, first_col, position, BLOCK)
            scores = _no_nan(log2_prob(xt, row_max, inv_t, a_log_sum) - log_e)
    else:
        log_e = _log2_noise(seed, first_col, position, BLOCK)
        scores = _no_nan(log2_prob(xt, row_max, inv_t, a_log_sum) - log_e)
        scores = tl.where(cols == excluded, NEG_INF, scores)  # the rejected point-mass token
    return tl.max(scores, axis=0, return_indices=True, return_indices_tie_break_left=True)


@triton.jit
def ordered_key(score):
    """A float32 score as an int32 whose signed order is the scores' order (NaN excluded), so that an
    integer ``atomic_max`` keeps a running maximum of scores."""
    bits = score.to(tl.int32, bitcast=True)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


@triton.jit
def score_of_key(key):
    """The inverse of ``ordered_key`` (the map is an involution on the bits)."""
    return (key ^ ((key >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)


@triton.jit
def score_slack(score):
    """A few float32 roundings of scores of magnitude ``|score|`` (tiny temperatures make scores of
    1e5 and more), the same expression compiled in two kernels, and the hardware ``log2``'s error
    (about 2^-22 each), with room to spare. ``inf`` for ``score = -inf``."""
    return PRUNE_MARGIN + (tl.abs(score) + 64.0) * PRUNE_RELATIVE


@triton.jit
def _block_weights(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t, a_log_sum, q_max, q_log_sum,
                   rejected, excluded, HAS_DRAFT: tl.constexpr, FULL: tl.constexpr, BLOCK: tl.constexpr):
    """``log2 w`` over columns ``first_col + [0, BLOCK)``: ``_block_race``'s weight expressions
    (residual, bonus or point-mass), NaN-free, ``-inf`` outside the row."""
    cols = first_col + tl.arange(0, BLOCK)
    xt = _load_block(t_row_ptr, cols, vocab_size, FULL)
    a = log2_prob(xt, row_max, inv_t, a_log_sum)
    if HAS_DRAFT:
        if rejected:
            xd = _load_block(q_row_ptr, cols, vocab_size, FULL)
            log_w = log2_positive_part(a, log2_prob(xd, q_max, inv_t, q_log_sum))
        else:
            log_w = _no_nan(a)
    else:
        log_w = _no_nan(a)
        if (excluded >= first_col) & (excluded < first_col + BLOCK):  # one block holds the rejected token
            log_w = tl.where(cols == excluded, NEG_INF, log_w)
    return log_w


@triton.jit
def _word_columns(values, BLOCK: tl.constexpr):
    """``values`` (``BLOCK`` columns) as four ``BLOCK / 4`` blocks: columns ``4 q + j`` for j = 0..3,
    the columns Philox word ``j`` of quad ``q`` serves. Undoes the race's interleave on the logit side
    (a reshape and two splits within each thread) instead of building it on the Philox side."""
    even, odd = tl.split(tl.reshape(values, (BLOCK // 4, 2, 2)))  # columns 4q + {0, 2} and 4q + {1, 3}
    c0, c2 = tl.split(even)
    c1, c3 = tl.split(odd)
    return c0, c1, c2, c3


@triton.jit
def _word_bounds(log_w, bits, LOG_LOWER: tl.constexpr):
    """Per column: ``log2 w - log2 u`` (at least the column's race score, since ``E >= u``) and,
    with ``LOG_LOWER``, ``log2 w - log2 u + log2(1 - u)`` (at most it, since ``E <= u / (1 - u)``)."""
    u = uniform_from_bits(bits)
    upper = log_w - fast_log2(u)
    lower = upper
    if LOG_LOWER:
        lower = upper + fast_log2(1.0 - u)
    return upper, lower


@triton.jit
def _quad_score(t_row_ptr, q_row_ptr, quad_col, vocab_size, row_max, inv_t, a_log_sum, q_max, q_log_sum,
                rejected, excluded, seed, position, HAS_DRAFT: tl.constexpr):
    """The best race score of the four columns from ``quad_col`` (a multiple of 4): ``_block_race``
    itself on a four-column block (masked, one Philox call)."""
    best, _ = _block_race(t_row_ptr, q_row_ptr, quad_col, vocab_size, row_max, inv_t, a_log_sum, q_max,
                          q_log_sum, rejected, excluded, seed, position, HAS_DRAFT, False, 4)
    return best


@triton.jit
def _block_bounds(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t, a_log_sum, q_max, q_log_sum,
                  rejected, excluded, seed, position, HAS_DRAFT: tl.constexpr, FULL: tl.constexpr,
                  BLOCK: tl.constexpr):
    """``(upper, lower)``: bounds of the best race score of one block of a sampled request's race.

    ``E = -log1p(-u)`` lies in ``[u, u / (1 - u)]`` (the race's float32 ``E`` keeps this to within
    its error, which the callers' ``score_slack`` covers), so ``upper = max (log2 w - log2 u)`` is at
    least every score of the block, for one ``log2`` per column where a score costs the polynomial,
    two logs and a select more. ``lower`` is a score some column reaches at least:

    - float32 logits: ``max (log2 w - log2 u + log2(1 - u))``, in the same pass;
    - 16-bit logits: the best exact score of the quad of columns that attains ``upper`` (its index
      from the reduction, its four columns raced again).

    The two differ only because each was the faster on the H200 for its dtype (v23 log,
    docs/kernels-log.md); either is a valid bound for any dtype. The block is taken in the Philox
    words' column order (``_word_columns``), so nothing is interleaved, and nothing of it stays live
    past the reductions.
    """
    log_w = _block_weights(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t, a_log_sum, q_max,
                           q_log_sum, rejected, excluded, HAS_DRAFT, FULL, BLOCK)
    LOG_LOWER: tl.constexpr = t_row_ptr.dtype.element_ty == tl.float32
    w0, w1, w2, w3 = philox_words(seed, first_col // 4 + tl.arange(0, BLOCK // 4), position, SAMPLE_STREAM)
    l0, l1, l2, l3 = _word_columns(log_w, BLOCK)
    s0, m0 = _word_bounds(l0, w0, LOG_LOWER)
    s1, m1 = _word_bounds(l1, w1, LOG_LOWER)
    s2, m2 = _word_bounds(l2, w2, LOG_LOWER)
    s3, m3 = _word_bounds(l3, w3, LOG_LOWER)
    quad_upper = tl.maximum(tl.maximum(s0, s1), tl.maximum(s2, s3))
    if LOG_LOWER:
        upper = tl.max(quad_upper, axis=0)
        lower = tl.max(tl.maximum(tl.maximum(m0, m1), tl.maximum(m2, m3)), axis=0)
    else:
        upper, quad = tl.max(quad_upper, axis=0, return_indices=True, return_indices_tie_break_left=True)
        lower = _quad_score(t_row_ptr, q_row_ptr, first_col + 4 * quad, vocab_size, row_max, inv_t, a_log_sum,
                            q_max, q_log_sum, rejected, excluded, seed, position, HAS_DRAFT)
    return upper, lower


@triton.jit
def _race_request(req, num_reqs, target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr, cu_ptr,
                  temperature_ptr, seeds_ptr, positions_ptr, row_max_ptr, row_log_sum_ptr, tau_ptr,
                  residual_logp_ptr, num_target_rows, out_width, HAS_DRAFT: tl.constexpr):
    """What every race block of sampled request ``req`` needs: ``(inv_t, target row pointer, draft row
    pointer, row_max, a_log_sum, q_max, q_log_sum, rejected, excluded, seed, position of row tau, first
    draft row)``.
    What decide wrote (``tau``, ``log p_tau``, the row statistics) is read past L1 (``.cg``): in the
    small-batch launch (kernels/fused_decide.py) another program wrote it during the same launch."""
    draft_row0, k = request_span(cu_ptr, req, num_target_rows - num_reqs, out_width - 1)
    inv_t = inverse_temperature(tl.load(temperature_ptr + req).to(tl.float32))
    tau = tl.load(tau_ptr + req, cache_modifier=".cg")
    bonus = tau >= k
    target_row = draft_row0 + req + tau
    t_row_ptr = target_ptr + target_row.to(tl.int64) * target_stride
    row_max = tl.load(row_max_ptr + target_row, cache_modifier=".cg")
    a_log_sum = (tl.load(row_log_sum_ptr + target_row, cache_modifier=".cg")
                 - tl.load(residual_logp_ptr + req, cache_modifier=".cg"))
    rejected = ~bonus
    excluded = -1
    q_row_ptr = t_row_ptr
    q_max = row_max
    q_log_sum = a_log_sum
    if HAS_DRAFT:
        q_row = num_target_rows + draft_row0 + tau
        q_row_ptr = draft_ptr + (draft_row0 + tau).to(tl.int64) * draft_stride
        q_max = tl.load(row_max_ptr + q_row, mask=rejected, other=0.0, cache_modifier=".cg")
        q_log_sum = tl.load(row_log_sum_ptr + q_row, mask=rejected, other=0.0, cache_modifier=".cg")
    else:
        excluded = tl.load(draft_ids_ptr + draft_row0 + tau, mask=rejected, other=-1)
    seed = tl.load(seeds_ptr + req)
    position_tau = tl.load(positions_ptr + req) + tau
    return (inv_t, t_row_ptr, q_row_ptr, row_max, a_log_sum, q_max, q_log_sum, rejected, excluded, seed,
            position_tau, draft_row0)


@triton.jit
def _race_block_exact(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t, a_log_sum, q_max,
                      q_log_sum, rejected, excluded, seed, position, HAS_DRAFT: tl.constexpr,
                      BLOCK: tl.constexpr):
    """``_block_race`` with the full-block test: ``(best score, its column)``."""
    if first_col + BLOCK <= vocab_size:
        best, index = _block_race(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t, a_log_sum,
                                  q_max, q_log_sum, rejected, excluded, seed, position, HAS_DRAFT, True,
                                  BLOCK)
    else:
        best, index = _block_race(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t, a_log_sum,
                                  q_max, q_log_sum, rejected, excluded, seed, position, HAS_DRAFT, False,
                                  BLOCK)
    return best, index + first_col


@triton.jit
def _race_candidates(req, num_reqs, t_row_ptr, q_row_ptr, vocab_size, row_max, inv_t, a_log_sum, q_max,
                     q_log_sum, rejected, excluded, seed, position, res_score_ptr, done_ptr, num_blocks,
                     HAS_DRAFT: tl.constexpr, BLOCK: tl.constexpr, NVB: tl.constexpr):
    """The pruned race's result ``(best score, its column)`` for request ``req``, run by its last block
    to finish: every block has stored its upper bound and raised the request's proven score. Only
    blocks whose upper bound reaches the proven score (less ``score_slack``) can hold the winner or a
    tie with it; they race exactly, in increasing order (ties go to the lowest column, as in the
    unpruned combine). A proven score of ``-inf`` means every weight is 0 (an empty residual): no block
    races and the caller's fallback runs."""
    proven = score_of_key(tl.load(done_ptr + 2 * num_reqs + req, cache_modifier=".cg"))
    vbs = tl.arange(0, NVB)
    uppers = tl.load(res_score_ptr + req * num_blocks + vbs, mask=vbs < num_blocks, other=NEG_INF,
                     cache_modifier=".cg")
    # -inf: nothing proven, no block races (at -FLT_MAX the limit is -inf: every block races)
    candidate = uppers >= tl.where(proven > NEG_INF, proven - score_slack(proven), float("inf"))
    best = tl.full((), NEG_INF, tl.float32)
    token = tl.full((), 0, tl.int32)
    vblock = tl.min(tl.where(candidate, vbs, NVB), axis=0)
    while vblock < num_blocks:
        score, column = _race_block_exact(t_row_ptr, q_row_ptr, vblock * BLOCK, vocab_size, row_max, inv_t,
                                          a_log_sum, q_max, q_log_sum, rejected, excluded, seed, position,
                                          HAS_DRAFT, BLOCK)
        token = tl.where(score > best, column, token)
        best = tl.maximum(score, best)
        vblock = tl.min(tl.where(candidate & (vbs > vblock), vbs, NVB), axis=0)
    return best, token


@launch_jit(
    counts=("num_target_rows", "num_blocks", "out_width"),
    small_pointers=("draft_ids_ptr", "cu_ptr", "temperature_ptr", "seeds_ptr", "positions_ptr", "row_max_ptr",
                    "row_log_sum_ptr", "tau_ptr", "residual_logp_ptr", "res_score_ptr", "res_index_ptr",
                    "done_ptr", "out_ids_ptr", "out_logprobs_ptr"))
def _race_blocks_kernel(target_ptr, draft_ptr, target_stride, draft_stride, draft_ids_ptr, cu_ptr,
                        temperature_ptr, seeds_ptr, positions_ptr, row_max_ptr, row_log_sum_ptr,
                        tau_ptr, residual_logp_ptr, res_score_ptr, res_index_ptr, done_ptr,
                        out_ids_ptr, out_logprobs_ptr, num_target_rows, vocab_size, num_blocks, out_width,
                        HAS_DRAFT: tl.constexpr, BLOCK_V: tl.constexpr, WANT_LOGPROBS: tl.constexpr,
                        NVB: tl.constexpr, FALLBACK_BLOCK: tl.constexpr, PRUNE: tl.constexpr,
                        PDL: tl.constexpr):
    # A dependent launch (kernels/dependent_launch.py) gains the launch and the last wave of decide;
    # what the race reads before its scores depends on decide's tau.
    let_next_start(PDL)
    wait_for_previous(PDL)
    race_block_program(tl.program_id(0), tl.program_id(1), tl.num_programs(0), target_ptr, draft_ptr,
                       target_stride, draft_stride, draft_ids_ptr, cu_ptr, temperature_ptr, seeds_ptr,
                       positions_ptr, row_max_ptr, row_log_sum_ptr, tau_ptr, residual_logp_ptr, res_score_ptr,
                       res_index_ptr, done_ptr, out_ids_ptr, out_logprobs_ptr, num_target_rows, vocab_size,
                       num_blocks, out_width, HAS_DRAFT, BLOCK_V, WANT_LOGPROBS, NVB, FALLBACK_BLOCK, PRUNE)


@triton.jit
def race_block_program(req, vblock, num_reqs, target_ptr, draft_ptr, target_stride, draft_stride,
                       draft_ids_ptr, cu_ptr, temperature_ptr, seeds_ptr, positions_ptr, row_max_ptr,
                       row_log_sum_ptr, tau_ptr, residual_logp_ptr, res_score_ptr, res_index_ptr, done_ptr,
                       out_ids_ptr, out_logprobs_ptr, num_target_rows, vocab_size, num_blocks, out_width,
                       HAS_DRAFT: tl.constexpr, BLOCK_V: tl.constexpr, WANT_LOGPROBS: tl.constexpr,
                       NVB: tl.constexpr, FALLBACK_BLOCK: tl.constexpr, PRUNE: tl.constexpr):
    """Block ``vblock`` of request ``req``'s race, and the request's emit when it is the last block
    to finish. ``PRUNE``: a block stores only bounds of its best score (``_block_bounds``: about
    two thirds of the race's work), and the last block races exactly the few blocks whose upper bound
    reaches the best lower bound (``_race_candidates``). The winner's block always races, with the
    code of the unpruned race, so the result is the same bit for bit."""
    # Greedy requests: decide wrote their output, so their programs do nothing (not even count).
    if tl.load(temperature_ptr + req).to(tl.float32) > 0:
        (inv_t, t_row_ptr, q_row_ptr, row_max, a_log_sum, q_max, q_log_sum, rejected, excluded, seed,
         position, draft_row0) = _race_request(req, num_reqs, target_ptr, draft_ptr, target_stride,
                                               draft_stride, draft_ids_ptr, cu_ptr, temperature_ptr,
                                               seeds_ptr, positions_ptr, row_max_ptr, row_log_sum_ptr,
                                               tau_ptr, residual_logp_ptr, num_target_rows, out_width,
                                               HAS_DRAFT)
        first_col = vblock * BLOCK_V
        out = req * num_blocks + vblock
        if PRUNE:
            if first_col + BLOCK_V <= vocab_size:
                upper, lower = _block_bounds(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t,
                                             a_log_sum, q_max, q_log_sum, rejected, excluded, seed, position,
                                             HAS_DRAFT, True, BLOCK_V)
            else:
                upper, lower = _block_bounds(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t,
                                             a_log_sum, q_max, q_log_sum, rejected, excluded, seed, position,
                                             HAS_DRAFT, False, BLOCK_V)
            tl.store(res_score_ptr + out, upper)
            if lower > NEG_INF:
                # a finite lower bound stays finite (at -FLT_MAX its slack would overflow to -inf,
                # which reads as "every weight is 0"); a NaN one (from +inf weights) is not published
                proven = tl.maximum(lower - score_slack(lower), -FLT_MAX)
                tl.atomic_max(done_ptr + 2 * num_reqs + req, ordered_key(proven), sem="relaxed")
        else:
            best, index = _race_block_exact(t_row_ptr, q_row_ptr, first_col, vocab_size, row_max, inv_t,
                                            a_log_sum, q_max, q_log_sum, rejected, excluded, seed, position,
                                            HAS_DRAFT, BLOCK_V)
            tl.store(res_score_ptr + out, best)
            tl.store(res_index_ptr + out, index)
        # The request's last block to finish combines all of them (one launch fewer than a separate
        # combine kernel). acq_rel: the partials (and the proven score) stored before each earlier
        # block's increment are visible after this one's; the counters are zeroed by the row-table
        # launch at the start of the chunk.
        tl.debug_barrier()
        finished = tl.atomic_add(done_ptr + req, 1, sem="acq_rel")
        if finished == num_blocks - 1:
            best = tl.full((), NEG_INF, tl.float32)
            token = tl.full((), 0, tl.int32)
            if PRUNE:
                best, token = _race_candidates(req, num_reqs, t_row_ptr, q_row_ptr, vocab_size, row_max,
                                               inv_t, a_log_sum, q_max, q_log_sum, rejected, excluded, seed,
                                               position, res_score_ptr, done_ptr, num_blocks, HAS_DRAFT,
                                               BLOCK_V, NVB)
            emit_request(req, target_ptr, target_stride, draft_row0 + req, temperature_ptr, seeds_ptr,
                         positions_ptr, row_max_ptr, row_log_sum_ptr, tau_ptr, res_score_ptr, res_index_ptr,
                         out_ids_ptr, out_logprobs_ptr, out_width, vocab_size, num_blocks, best, token,
                         WANT_LOGPROBS, NVB, FALLBACK_BLOCK, PRUNE)


@triton.jit
def emit_request(req, target_ptr, target_stride, target_row0, temperature_ptr, seeds_ptr, positions_ptr,
                 row_max_ptr, row_log_sum_ptr, tau_ptr, res_score_ptr, res_index_ptr,
                 out_ids_ptr, out_logprobs_ptr, out_width, vocab_size, num_blocks, pruned_best, pruned_token,
                 WANT_LOGPROBS: tl.constexpr, NVB: tl.constexpr, FALLBACK_BLOCK: tl.constexpr,
                 PRUNED: tl.constexpr):
    """Pass B for request ``req`` (first target row ``target_row0``): the lowest-index best of its
    block partials (``PRUNED``: ``pruned_best`` at ``pruned_token``, from ``_race_candidates``), or
    the fallback race when that is ``-inf``, written with its logprob. Partials are read past L1
    (``.cg``): other programs wrote them during this launch."""
    temperature = tl.load(temperature_ptr + req).to(tl.float32)
    sampled = temperature > 0
    inv_t = inverse_temperature(temperature)
    tau = tl.load(tau_ptr + req, cache_modifier=".cg")
    target_row = target_row0 + tau
    row_max = tl.load(row_max_ptr + target_row, cache_modifier=".cg")
    row_log_sum = tl.load(row_log_sum_ptr + target_row, cache_modifier=".cg")

    if PRUNED:
        best = pruned_best
        token = pruned_token
    else:
        vbs = tl.arange(0, NVB)
        scores = tl.load(res_score_ptr + req * num_blocks + vbs, mask=vbs < num_blocks, other=NEG_INF,
                         cache_modifier=".cg")
        best = tl.max(scores, axis=0)
        first = tl.min(tl.where(scores == best, vbs, NVB), axis=0)
        token = tl.load(res_index_ptr + req * num_blocks + first, mask=first < num_blocks, other=0,
                        cache_modifier=".cg")
    if sampled & (best == NEG_INF):  # empty residual: race over the target row instead
        seed = tl.load(seeds_ptr + req)
        position = tl.load(positions_ptr + req) + tau
        fallback_best = best
        fallback_token = token * 0
        for start in range(0, vocab_size, FALLBACK_BLOCK):
            cols = start + tl.arange(0, FALLBACK_BLOCK)
            race = _target_race_scores(target_ptr, target_stride, target_row, start, vocab_size,
                                       cols < vocab_size, row_max, inv_t, row_log_sum, seed, position,
                                       FALLBACK_BLOCK)
            block_best = tl.max(race, axis=0)
            block_token = tl.argmax(race, axis=0, tie_break_left=True) + start
            fallback_token = tl.where(block_best > fallback_best, block_token, fallback_token)
            fallback_best = tl.maximum(block_best, fallback_best)
        token = fallback_token
    token = tl.minimum(tl.maximum(token, 0), vocab_size - 1)
    out = req.to(tl.int64) * out_width + tau
    tl.store(out_ids_ptr + out, token.to(tl.int64), mask=sampled)
    if WANT_LOGPROBS:
        x = tl.load(target_ptr + target_row.to(tl.int64) * target_stride + token, mask=sampled,
                    other=0.0).to(tl.float32)
        tl.store(out_logprobs_ptr + out, log_prob(x, row_max, inv_t, row_log_sum), mask=sampled)


def launch_residual_sample(ws, batch, num_reqs, *, has_draft, want_logprobs, race_block, race_blocks,
                           nvb_pow2, prune=False, pdl=False):
    """The race of a chunk (``prune``: bounds first, exact races only where they cannot rule a block
    out; the same results bit for bit, ``race_block_program``)."""
    draft = batch.draft_logits if has_draft else batch.target_logits
    out_logprobs = batch.out_logprobs if want_logprobs else batch.out_num
    _race_blocks_kernel[(num_reqs, race_blocks)](
        batch.target_logits, draft, batch.target_logits.stride(0), draft.stride(0), batch.draft_token_ids,
        batch.cu, batch.temperature, batch.seeds, batch.positions, ws.row_max, ws.row_log_sum,
        ws.tau, ws.residual_logp, ws.res_score, ws.res_index, ws.done, batch.out_ids, out_logprobs,
        batch.target_logits.shape[0], batch.target_logits.shape[1], race_blocks, batch.out_ids.shape[1],
        HAS_DRAFT=has_draft, BLOCK_V=race_block, WANT_LOGPROBS=want_logprobs, NVB=nvb_pow2,
        FALLBACK_BLOCK=1024, PRUNE=prune, num_warps=tuning.race_warps(race_block, prune),
        variant=batch.variant,
        **tuning.race_register_cap(race_block, prune), **dependent_launch.options(pdl),
    )
