"""The mutant catalogue: source-level edits of ``kernels/`` that the harness must detect.

Each ``Mutant`` replaces one ``anchor`` (exact text that occurs exactly ONCE in its file, checked by
``harness.mutation.mutate.anchor_problems`` and by a test, so the catalogue cannot drift silently from the
kernels) with ``replacement``. Mutants are applied to a temporary copy of ``kernels/``; the real tree
is never touched. ``bug_class`` names the BUGS.md class the edit reproduces (``BUGS#n``) or the
generic operator family (``generic:...``).

A mutant believed equivalent (no input can tell it from the original) must say why in
``equivalent``; it is reported, never silently skipped, and excluded from the score only with that
argument attached. ``fast`` marks the subset CI runs; ``killers`` lists the properties expected to
kill it (run first, and alone in the fast subset). Every mutant is checked on the default
configuration: ``kernels/`` has no switches that select other paths.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    bug_class: str
    file: str  # path relative to kernels/
    anchor: str
    replacement: str
    description: str
    killers: tuple[str, ...] = ()
    fast: bool = False
    equivalent: str = ""  # non-empty: the argument that no input distinguishes it


def _m(name, bug_class, file, anchor, replacement, description, killers=(), fast=False, equivalent=""):
    return Mutant(name, bug_class, file, anchor, replacement, description, tuple(killers), fast, equivalent)


COUPLED, STRUCT, INVAR = "coupled_exactness", "structural", "chunk_invariance"
POINT, SHIFT = "point_mass_identity", "logit_shift"
BAD = "bad_input_after_good_call"

# pass 1's masked row load (kernels/row_stats.py: the last vocab block of a row), the anchor of two
# mutants; blocks inside the row load without a mask
_ROW_LOAD = ("x = widen(tl.load(row_ptr + cols, mask=cols < vocab_size, other=NEG_INF, "
             "eviction_policy=STREAM))")
# the line after pass 1's loads: what runs on every block's widened logits
_AFTER_ROW_LOAD = "    scale = tl.load(row_scale_ptr + row)\n"

CATALOGUE: tuple[Mutant, ...] = (
    # --- randomness (BUGS.md 1, 8, 20) ------------------------------------------------------------
    _m(
        "residual-uses-accept-stream",
        "BUGS#1",
        "residual_sample.py",
        "sampling_uniforms_block(seed, first_col, position, SAMPLE_STREAM,",
        "sampling_uniforms_block(seed, first_col, position, 0,",
        "residual/bonus noise drawn from the ACCEPT stream: correlated with the acceptance uniform",
        (COUPLED,),
        fast=True,
    ),
    _m(
        "one-accept-uniform-per-request",
        "BUGS#20",
        "decide.py",
        "u = philox_uniform(seed, rows * 0, position0 + rows, ACCEPT_STREAM)",
        "u = philox_uniform(seed, rows * 0, position0, ACCEPT_STREAM)",
        "every draft slot of a request reuses the first slot's accept uniform",
        (COUPLED,),
    ),
    _m(
        "uniform-can-be-zero",
        "BUGS#8",
        "randomness.py",
        "u = bits.to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10",
        "u = bits.to(tl.float32) * 2.3283064365386963e-10",
        "uniforms in [0, 1) instead of (0, 1): u == 0 accepts a zero-probability draft",
        (COUPLED,),
    ),
    _m(
        "accept-all",
        "BUGS#20",
        "decide.py",
        "token_accept = tl.log(u) + log_q < log_b",
        "token_accept = tl.log(u) + log_q < log_b + 1.0e4",
        "token verification accepts every in-vocabulary draft (verification effectively off)",
        (STRUCT, COUPLED),
        fast=True,
    ),
    _m(
        "sample-uniforms-next-position",
        "generic:off-by-one",
        "residual_sample.py",
        "position_tau = tl.load(positions_ptr + req) + tau",
        "position_tau = tl.load(positions_ptr + req) + tau + 1",
        "residual noise keyed by the next position's counter (row and randomness out of step)",
        (COUPLED,),
    ),
    _m(
        "naive-exponential-noise",
        "BUGS#15",
        "randomness.py",
        "return fast_log2(tl.where(u < SERIES_BELOW, series, direct))",
        "return fast_log2(direct)",
        "E = -log(1 - u) in float32: quantised near u -> 0 (the winners' tail) instead of -log1p(-u)",
        (COUPLED,),
    ),
    # --- rows and residuals (BUGS.md 2, 3, 4, 7, 19) ---------------------------------------------
    _m(
        "residual-from-first-row",
        "BUGS#2",
        "residual_sample.py",
        "target_row = draft_row0 + req + tau",
        "target_row = draft_row0 + req",
        "correction/bonus sampled from the request's first target row instead of row tau (stale offset)",
        (STRUCT, COUPLED),
        fast=True,
    ),
    _m(
        "residual-draft-row-stale",
        "BUGS#2",
        "residual_sample.py",
        "q_row_ptr = draft_ptr + (draft_row0 + tau).to(tl.int64)",
        "q_row_ptr = draft_ptr + (draft_row0).to(tl.int64)",
        "residual subtracts the first draft row's q instead of row tau's",
        (COUPLED,),
    ),
    _m(
        "residual-from-target",
        "BUGS#3",
        "residual_sample.py",
        "scores = log2_positive_part(a, log2_prob(xd, q_max, inv_t, q_log_sum)) - log_e",
        "scores = _no_nan(a - log_e)",
        "after a rejection the correction is resampled from the target b instead of (b - q)_+",
        (COUPLED, POINT),
    ),
    _m(
        "bonus-only-beyond-k",
        "BUGS#4",
        "residual_sample.py",
        "bonus = tau >= k",
        "bonus = tau > k",
        "when every draft is accepted the bonus is drawn from a residual with the NEXT request's draft row",
        (COUPLED,),
    ),
    _m(
        "block-uses-token-residual",
        "BUGS#7",
        "residual_sample.py",
        '- tl.load(residual_logp_ptr + req, cache_modifier=".cg"))',
        '- 0.0)',
        "after a block rejection the token residual (b - q)_+ is sampled instead of (p_tau b - q)_+",
        (COUPLED,),
    ),
    _m(
        "draft-temperature-ignored",
        "BUGS#19",
        "decide.py",
        "log_q = tl.where(x_ok, log_prob(d_x, q_max, inv_t, q_log_sum), 0.0)",
        "log_q = tl.where(x_ok, log_prob(d_x, q_max, 1.0, q_log_sum), 0.0)",
        "q(x) for the accept test computed without the temperature: a different q than the one sampled",
        (COUPLED,),
    ),
    _m(
        "residual-operands-swapped",
        "generic:swapped-operands",
        "residual_sample.py",
        "one_minus_exp2_negative(log_q - a)",
        "one_minus_exp2_negative(a - log_q)",
        "residual weight where q > p b instead of p b > q",
        (COUPLED, POINT),
    ),
    # --- block verification (BUGS.md 5, 6) --------------------------------------------------------
    _m(
        "block-breaks-at-first-failure",
        "BUGS#5",
        "decide.py",
        "block_tau = tl.where((s >= 1) & (eta <= h), s, block_tau)",
        "block_tau = tl.where((s >= 1) & (eta <= h) & (block_tau == s - 1), s, block_tau)",
        "block scan stops at the first failed eta_i instead of taking the last success",
        (COUPLED,),
    ),
    _m(
        "block-clips-only-at-end",
        "BUGS#6",
        "decide.py",
        "stepped = tl.minimum(log_p + (log_b - log_q), 0.0)",
        "stepped = log_p + (log_b - log_q)",
        "cumulative ratio p_i not clipped at every step (only h_g = min(p_g, 1) in effect)",
        (COUPLED,),
    ),
    _m(
        "block-eta-off-by-one",
        "generic:off-by-one",
        "decide.py",
        "eta = _pick(u, rows, s - 1)",
        "eta = _pick(u, rows, s)",
        "h_i compared with eta_{i+1}",
        (COUPLED,),
    ),
    _m(
        "block-residual-p-off-by-one",
        "generic:off-by-one",
        "decide.py",
        "residual_logp = tl.where(tau < k, _pick(logp_before, rows, tau), 0.0)",
        "residual_logp = tl.where(tau < k, _pick(logp_before, rows, tau + 1), 0.0)",
        "block residual scaled by p_{tau+1} instead of p_tau",
        (COUPLED,),
    ),
    _m(
        "block-inclusive-to-strict",
        "generic:comparison",
        "decide.py",
        "block_tau = tl.where((k >= 1) & (eta_last <= tl.exp(log_p)), k, block_tau)",
        "block_tau = tl.where((k >= 1) & (eta_last < tl.exp(log_p) - 1e-3), k, block_tau)",
        "last block position accepted with eta < p_g - 1e-3 instead of eta <= p_g",
        (COUPLED,),
    ),
    # --- numerics, vocab tail, greedy (BUGS.md 9, 10, 12, 13, 14) ---------------------------------
    _m(
        "padded-tail-zero",
        "BUGS#10",
        "row_stats.py",
        _ROW_LOAD,
        _ROW_LOAD.replace("other=NEG_INF", "other=0.0"),
        "masked lanes of the last vocab block read as 0: they win max/argmax of all-negative rows",
        (STRUCT, COUPLED),
        fast=True,
    ),
    _m(
        "row-stats-mask-dropped",
        "generic:dropped-mask",
        "row_stats.py",
        _ROW_LOAD,
        _ROW_LOAD.replace("mask=cols < vocab_size, other=NEG_INF, ", ""),
        "the last vocab block reads past the row (next row's logits join the statistics)",
        (STRUCT, COUPLED),
    ),
    _m(
        "greedy-last-index-tie",
        "BUGS#12",
        "decide.py",
        "        found = tl.min(tl.where(inside & (x == row_max), cols, none), axis=0)\n",
        "        found = tl.max(tl.where(inside & (x == row_max), cols, -1), axis=0)\n"
        "        found = tl.where(found < 0, none, found)\n",
        "greedy argmax ties go to the LAST index of a scan step instead of the first",
        (COUPLED,),
    ),
    _m(
        "greedy-last-block-tie",
        "BUGS#12",
        "decide.py",
        "first_best = tl.min(tl.where(blk_max == row_max[:, None], vbs[None, :], NVB), axis=1)",
        "first_best = tl.max(tl.where(blk_max == row_max[:, None], vbs[None, :], -1), axis=1)",
        "greedy argmax ties across vocab blocks go to the last block",
        (COUPLED,),
    ),
    _m(
        "greedy-scan-stops-before-tau",
        "BUGS#4",
        "decide.py",
        "scanned = tl.min(tl.where(slot & ~may_accept, rows, k), axis=0) + 1",
        "scanned = tl.min(tl.where(slot & ~may_accept, rows, k + 1), axis=0)",
        "greedy argmax read for the rows before the first draft that cannot hold the max, not for that "
        "row (all rows when every draft may be accepted): the rejection emits column 0",
        (COUPLED,),
    ),
    _m(
        "tiny-temperature-cancellation",
        "BUGS#13",
        "row_stats.py",
        "block_sum = tl.sum(tl.exp2((x - block_max) * exp2_scale), axis=0)",
        "block_sum = tl.sum(tl.exp2(x * exp2_scale - block_max * exp2_scale), axis=0)",
        "logits scaled before subtracting the max: catastrophic cancellation at T = 1e-8",
        (COUPLED, SHIFT),
    ),
    _m(
        "tail-swallowed-by-max",
        "BUGS#13",
        "row_stats.py",
        "    if block_sum < 2.0:",
        "    if block_sum < 0.0:",
        "a block's tail is taken as (sum - 1), so the max's 1 swallows tails below float32's epsilon: "
        "at a mode shared by near-one-hot target and draft rows the residual (their tail difference) "
        "vanishes and the correction goes to the wrong token",
        (COUPLED,),
    ),
    _m(
        "deep-tail-path-off",
        "BUGS#13",
        "deep_tails.py",
        "DEEP_TAIL = tl.constexpr(5.421010862427522e-20)",
        "DEEP_TAIL = tl.constexpr(0.0)",
        "no deep-tail path: at a mode shared by target and draft rows whose tails are below float32's "
        "range the residual (the draft's tail) is lost and the correction goes to the wrong token",
        (COUPLED,),
    ),
    _m(
        "deep-tail-mode-never-scored",
        "generic:dropped-candidate",
        "deep_tails.py",
        "take = ((mode >= 0) & (mode_score > NEG_INF)",
        "take = ((mode < -1) & (mode_score > NEG_INF)",
        "the deep-tail race takes the shared mode out of the race but never scores it back in",
        (COUPLED,),
    ),
    _m(
        "deep-tail-claim-dropped",
        "generic:dropped-write",
        "decide.py",
        "tl.store(done_ptr + req, CLAIMED)",
        "pass",
        "the decide kernel emits a deep-tail correction but does not claim the request, so the race "
        "overwrites it with the float32-tail answer",
        (COUPLED,),
    ),
    _m(
        "block-one-minus-p-rounded",
        "BUGS#14",
        "decide.py",
        "one_minus_p = one_minus_exp2(log_p * LOG2E)",
        "one_minus_p = 1.0 - tl.exp(log_p)",
        "block h with 1 - p taken as 1 - exp(log p): 0 once p is within float32's epsilon of 1, so "
        "h = 1 where Z and 1 - p are both tiny",
        (COUPLED,),
    ),
    _m(
        "residual-mass-linear-difference",
        "BUGS#14",
        "residual_mass.py",
        "return tl.sum(tl.where(gap < 0, tl.exp2(log2_pb) * one_minus_exp2_negative(gap), 0.0), axis=0)",
        "return tl.sum(tl.maximum(tl.exp2(log2_pb) - tl.exp2(log2_q), 0.0), axis=0)",
        "block pass 2 forms each (p b - q)_+ as a float32 difference of near-1 probabilities, which "
        "cancels to 0 or an ulp of 1 where the residual is below float32's epsilon",
        (COUPLED,),
    ),
    _m(
        "residual-mass-halved-16bit",
        "generic:other-value",
        "residual_mass.py",
        "        z = _mass_sum(xt, xd, target_row, draft_row, temperature, row_max_ptr, "
        "row_log_sum_ptr, log_p,\n"
        "                      num_target_rows)\n    tl.store(",
        "        z = 0.5 * _mass_sum(xt, xd, target_row, draft_row, temperature, row_max_ptr, "
        "row_log_sum_ptr, log_p,\n                      num_target_rows)\n    tl.store(",
        "block pass 2 returns Z / 2 for bf16 / fp16 logits only (the load structure of 16-bit rows): "
        "h = Z / (Z + 1 - p) too small, so block verification stops inside its draft too rarely "
        "(killed by the crafted close-draft cases: v14's properties all passed it)",
        (COUPLED,),
    ),
    _m(
        "mass-skip-inverted",
        "generic:comparison",
        "decide.py",
        "cannot_pass = tl.log(_pick(u, rows, s - 1)) > log_p + MASS_SKIP_MARGIN",
        "cannot_pass = tl.log(_pick(u, rows, s - 1)) <= log_p + MASS_SKIP_MARGIN",
        "block pass 2 skips the slots whose Z can decide tau (eta_s <= p_s) and computes the others, "
        "so those slots see Z = 0, h_s = 0, and are never accepted",
        (COUPLED,),
    ),
    _m(
        "mass-skip-bound-off-by-one",
        "generic:off-by-one",
        "decide.py",
        "cannot_pass = tl.log(_pick(u, rows, s - 1)) > log_p + MASS_SKIP_MARGIN",
        "cannot_pass = tl.log(_pick(u, rows, s - 1)) > clipped_log_ratio_step(log_p, lb_s, "
        "_pick(log_q, rows, s)) + MASS_SKIP_MARGIN",
        "the skip bounds h_s by p_{s+1} instead of p_s: a slot with p_{s+1} < eta_s <= h_s loses its Z "
        "and its acceptance",
        (COUPLED,),
    ),
    _m(
        "half-precision-statistics",
        "BUGS#14",
        "row_stats.py",
        _AFTER_ROW_LOAD,
        "    x = x.to(tl.float16).to(tl.float32)\n" + _AFTER_ROW_LOAD,
        "row statistics computed from logits rounded to float16 (bf16/fp32 inputs lose precision)",
        (COUPLED, SHIFT),
    ),
    _m(
        "negative-draft-id-indexes",
        "BUGS#11",
        "decide.py",
        "x_ok = slot & (x >= 0) & (x < vocab_size)",
        "x_ok = slot & (x < vocab_size)",
        "a -1 draft id is used as an index (reads the logit before the row) instead of never accepted",
        (STRUCT, COUPLED),
    ),
    _m(
        "empty-residual-no-fallback",
        "BUGS#9",
        "residual_sample.py",
        "        token = fallback_token\n",
        "        token = token\n",
        "an empty residual (every weight 0) emits the empty race's block-0 index instead of the "
        "documented fallback race over the target row",
        (COUPLED,),
    ),
    # --- output contract and chunking (BUGS.md 17, 18) --------------------------------------------
    _m(
        "padding-zero",
        "BUGS#18",
        "decide.py",
        "ids = tl.where(rows < tau, x, -1)",
        "ids = tl.where(rows < tau, x, 0)",
        "output padding written as 0 instead of -1",
        (STRUCT,),
        fast=True,
    ),
    _m(
        "num-emitted-excludes-final",
        "BUGS#18",
        "decide.py",
        "tl.store(out_num_ptr + req, (tau + 1).to(tl.int32))",
        "tl.store(out_num_ptr + req, tau.to(tl.int32))",
        "num_emitted counts accepted drafts only, not the correction/bonus token",
        (STRUCT,),
    ),
    _m(
        "race-counter-not-reset",
        "generic:stale-state",
        "row_stats.py",
        "    tl.store(done_ptr + req, 0)\n",
        "",
        "the per-request count of finished race blocks is not zeroed: a call on a kept workspace never "
        "emits the correction/bonus token (its last block is never recognised)",
        (STRUCT, COUPLED),
    ),
    _m(
        "chunk-seeds-from-first-chunk",
        "BUGS#17",
        "driver.py",
        "seeds=seeds[start:end]",
        "seeds=seeds[0:end - start]",
        "each chunk reads the seeds of the batch's first requests (randomness keyed by chunk-local index)",
        (INVAR, COUPLED),
    ),
    _m(
        "chunk-drops-last-request",
        "BUGS#17",
        "chunking.py",
        "chunks.append((start, end))",
        "chunks.append((start, max(start + 1, end - 1)) if end - start > 1 else (start, end))",
        "a multi-request chunk silently drops its last request (never written)",
        (STRUCT, INVAR),
    ),
    _m(
        "logprob-without-temperature",
        "generic:wrong-argument",
        "residual_sample.py",
        "log_prob(x, row_max, inv_t, row_log_sum), mask=sampled)",
        "log_prob(x, row_max, 1.0, row_log_sum), mask=sampled)",
        "logprob of the correction/bonus token under the unscaled row",
        (COUPLED,),
    ),
    _m(
        "race-min-instead-of-max",
        "generic:min-max-swap",
        "residual_sample.py",
        "return tl.max(scores, axis=0, return_indices=True",
        "return tl.min(scores, axis=0, return_indices=True",
        "each vocab block reports its worst residual score (and that score's index) instead of its best",
        (COUPLED,),
    ),
    # --- the pruned race (kernels/residual_sample.py: bounds first, exact races where they cannot rule
    # a block out) ---------------------------------------------------------------------------------------
    _m(
        "race-prune-claims-upper",
        "generic:wrong-bound",
        "residual_sample.py",
        "lower = tl.max(tl.maximum(tl.maximum(m0, m1), tl.maximum(m2, m3)), axis=0)",
        "lower = upper",
        "a float32 block proves its upper bound instead of a score some column reaches: blocks whose "
        "best is below the best upper bound, the winner's among them, are skipped",
        (COUPLED,),
    ),
    _m(
        "race-prune-claims-upper-16bit",
        "generic:wrong-bound",
        "residual_sample.py",
        "lower = _quad_score(",
        "lower = upper + 0.0 * _quad_score(",
        "a 16-bit block proves its upper bound instead of the exact score of the quad that attains it "
        "(16-bit blocks bound by other code than float32 ones)",
        (COUPLED,),
    ),
    _m(
        "race-prune-first-candidate-only",
        "generic:dropped-candidate",
        "residual_sample.py",
        "        vblock = tl.min(tl.where(candidate & (vbs > vblock), vbs, NVB), axis=0)\n",
        "        vblock = vblock * 0 + num_blocks\n",
        "the pruned race's last block races only the first block the bounds leave, not every one of them",
        (COUPLED,),
    ),
    # --- small-batch launch (kernels/fused_decide.py: chunks of few requests) -------------------------
    _m(
        "small-batch-decides-in-first-program",
        "generic:wrong-condition",
        "fused_decide.py",
        'return tl.atomic_add(counter_ptr, 1, sem="acq_rel") == num_programs - 1',
        'return tl.atomic_add(counter_ptr, 1, sem="acq_rel") == 0',
        "the small-batch launch decides in the stage's first program to finish, from statistics the "
        "other blocks have not stored yet",
        (COUPLED,),
    ),
    _m(
        "small-batch-never-decides",
        "generic:dropped-write",
        "fused_decide.py",
        "BLOCK_METHOD, HAS_DRAFT, True, not TWO_STAGE, WANT_LOGPROBS,",
        "BLOCK_METHOD, HAS_DRAFT, True, False, WANT_LOGPROBS,",
        "the small-batch launch runs only decide's COMBINE stage for token and point-mass batches: "
        "no request is decided and the race samples at a stale tau",
        (STRUCT, COUPLED),
    ),
    # --- call plans (kernels/call_plan.py): per-layout state must not swallow a check --------------
    _m(
        "plan-skips-value-verdict",
        "generic:stale-state",
        "call_plan.py",
        "            max_k = self.summary.verdict()\n",
        "            max_k = self.storage - 1\n",
        "a repeated small layout never reads its value summary: bad cu, draft ids or temperatures "
        "after a good call of the same layout are accepted (and the width is the widest allowed)",
        (STRUCT, BAD),
    ),
    _m(
        "plan-key-ignores-dtypes",
        "generic:stale-state",
        "call_plan.py",
        "    return x.shape, x.stride(), x.dtype, x.device, x.layout\n",
        "    return x.shape, x.stride(), x.device, x.layout\n",
        "the plan key leaves out the tensors' dtypes: a batch of a seen layout with float64 logits or "
        "another draft dtype skips the metadata checks",
        (BAD,),
    ),
    _m(
        "replay-ignores-width",
        "generic:stale-state",
        "call_plan.py",
        "        steps = self.replays.get(width)\n",
        "        steps = next(iter(self.replays.values()), None)\n",
        "a replay plan (one-chunk calls of more than 4 requests) replays the launches it recorded at "
        "its first width for every later width: same shapes, other draft lengths give outputs of the "
        "new width written as the old one (stale geometry and output width)",
        ("layout_reuse",),
    ),
    # --- argued equivalent --------------------------------------------------------------------------
    _m(
        "combine-padded-sum-one",
        "generic:other-value",
        "decide.py",
        "blk_tail = tl.load(blk_tail_ptr + offs, mask=mask, other=-1.0, cache_modifier=CACHE)",
        "blk_tail = tl.load(blk_tail_ptr + offs, mask=mask, other=0.0, cache_modifier=CACHE)",
        "padded (row, block) partial tails read as 0 (a sum of 1) instead of -1 (a sum of 0)",
        equivalent="every masked lane also reads blk_max = -inf (other=NEG_INF on the line above), so "
        "rescale = where(blk_max == -inf, 0, ...) multiplies its (tail + 1) by exactly 0, and it is "
        "never the first max block (a real block of the row has a lower index and a max >= -inf); "
        "row_log_sum is bit-identical for every row the kernels store or read (rows past k differ and "
        "are discarded)",
    ),
)


def by_name(names: list[str] | tuple[str, ...] | None = None) -> list[Mutant]:
    """The mutants named (all when ``names`` is empty); unknown names raise ``KeyError``."""
    if not names:
        return list(CATALOGUE)
    index = {m.name: m for m in CATALOGUE}
    missing = [n for n in names if n not in index]
    if missing:
        raise KeyError(f"unknown mutants {missing}; known: {sorted(index)}")
    return [index[n] for n in names]
