"""Crafted coupled cases: inputs plus seeds chosen so that one rare event happens for sure.

Random examples reach some bugs only with probability ~1e-3 to ~1e-8 per request (a uniform in the
winners' tail, an acceptance uniform within 1e-3 of its threshold, a block rejection whose residual
differs from the token residual). These cases put that event into a small batch deterministically,
using the pinned Philox layout of docs/interfaces.md section 1 (``reference.rng``). For a kernel
with another randomness layout they are still valid coupled cases, just not targeted.

Every case carries a ``label`` naming the event; ``tests/harness/test_crafted.py`` re-derives each
event from ``reference.rng`` so a layout change cannot silently defuse a case.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from harness.contract import VerifyBatch
from harness.generation.cases import Case, case_from_batch

# Found offline with reference.rng (tests/harness/test_crafted.py checks both still hold):
# seed 49605, position 0: sampling uniform of vocabulary index 794 is 1.99e-8 < 2^-25, so
# float32 1 - u rounds to 1 and E = -log(1 - u) would be 0 (BUGS.md class 15).
TINY_UNIFORM_SEED, TINY_UNIFORM_INDEX, TINY_UNIFORM_VOCAB = 49605, 794, 1024
# seed 1151, position 0: the accept uniform of slot 0 is 0.99973, within 1e-3 of 1.
HIGH_ETA_SEED = 1151


def _case(target, draft, ids, lengths, seeds, method, label, temperatures=None, dtype=torch.float32) -> Case:
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    num_reqs = len(lengths)
    batch = VerifyBatch(
        target_logits=torch.tensor(np.asarray(target, dtype=np.float32)).to(dtype),
        draft_logits=None if draft is None else torch.tensor(np.asarray(draft, dtype=np.float32)).to(dtype),
        draft_token_ids=torch.tensor(np.asarray(ids, dtype=np.int64)),
        cu_num_draft_tokens=cu,
        temperature=torch.tensor(temperatures or [1.0] * num_reqs, dtype=torch.float32),
        seeds=torch.tensor(seeds, dtype=torch.int64),
        positions=torch.zeros(num_reqs, dtype=torch.int64),
        method=method,
    )
    case = case_from_batch(batch)
    case.label = label
    return case


def tiny_uniform_case(method: str) -> Case:
    """A bonus draw whose uniform at one vocabulary index is below 2^-25, where that token has
    target probability ~1e-25: with ``E = -log1p(-u)`` it loses the race by a wide margin; with
    ``E = -log(1 - u)`` in float32, ``E == 0`` and it wins with score ``+inf``.

    The winner is its neighbour, 30 nats above the flat rest of the row: a race that skips
    vocabulary blocks whose bounds cannot win (ours, kernels/residual_sample.py, bounds ``E`` by
    ``u``) races the trap's block exactly, so a wrong ``E`` there still decides the case."""
    target = np.zeros((1, TINY_UNIFORM_VOCAB))
    target[0, TINY_UNIFORM_INDEX] = -50.0
    target[0, TINY_UNIFORM_INDEX + 1] = 30.0
    return _case(target, np.zeros((0, TINY_UNIFORM_VOCAB)), [], [0], [TINY_UNIFORM_SEED], method,
                 "crafted: sampling uniform below 2^-25 on a token of probability ~1e-25")


def high_eta_block_case() -> Case:
    """Block verification, one draft, identical target and draft rows (``p_1 = 1``) and an accept
    uniform of 0.99973: the last position must be accepted (``eta <= p``, inclusive)."""
    logits = np.log(np.array([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]]))
    return _case(logits, logits[:1], [0], [1], [HIGH_ETA_SEED], "block",
                 "crafted: block eta_g = 0.99973 with p_g = 1")


# Block residual design (V = 3, two drafts, both token 0): row 0 gives p_1 = b0(0)/q0(0) = 0.6;
# at row 1 the token residual (b - q)+ = [0, .1, .4] while the block residual (0.6 b - q)+ =
# [0, 0, .2]: a block rejection at tau = 1 must never emit token 1.
_B = np.array([[0.3, 0.4, 0.3], [0.1, 0.4, 0.5], [1 / 3, 1 / 3, 1 / 3]])
_Q = np.array([[0.5, 0.25, 0.25], [0.6, 0.3, 0.1]])


@functools.lru_cache(maxsize=1)
def block_residual_seeds(count: int = 2, search: int = 4096) -> tuple[int, ...]:
    """Seeds (position 0) for which the design above rejects at tau = 1 and the race over the token
    residual would pick another token than the race over the block residual."""
    from reference import rng
    from reference.verify import verify_batch

    seeds = np.arange(search, dtype=np.int64)
    reqs = seeds.size
    cu = np.arange(reqs + 1, dtype=np.int64) * 2
    positions = np.zeros(reqs, dtype=np.int64)
    u_accept = rng.accept_uniforms(seeds, positions, cu)
    u_sample = rng.sampling_uniforms(seeds, positions, cu, 3)
    result = verify_batch(np.log(np.tile(_B, (reqs, 1))), np.log(np.tile(_Q, (reqs, 1))),
                          np.zeros(2 * reqs, np.int64), cu, np.ones(reqs), u_accept, u_sample, "block")
    exponentials = rng.exponential_from_uniform(u_sample[1::3])  # row 1 of every request
    with np.errstate(divide="ignore"):
        token_residual = np.log(np.maximum(_B[1] - _Q[1], 0.0))
        token_residual_pick = np.argmax(token_residual - np.log(exponentials), axis=1)
    tau = result.num_emitted - 1
    killers = np.flatnonzero((tau == 1) & (result.output_token_ids[:, 1] != token_residual_pick))
    return tuple(int(s) for s in seeds[killers[:count]])


def block_residual_case() -> Case:
    seeds = list(block_residual_seeds())
    reqs = len(seeds)
    return _case(np.log(np.tile(_B, (reqs, 1))), np.log(np.tile(_Q, (reqs, 1))), [0, 0] * reqs, [2] * reqs,
                 seeds, "block",
                 "crafted: block rejection at tau = 1 where (p b - q)+ != (b - q)+ changes the race")


# Empty residual from float32 rounding (V = 1024, token method, one draft x = 1023): target row 0 is
# 1023 zeros and -2^-16 at x, the draft row is all zeros. Both row sums round to 1024 in float32, so
# every computed log q_v >= log b_v: the float32 residual is EMPTY, although in exact arithmetic
# b_v > q_v by ~1e-8 off x. A rejection needs u >= exp(-2^-16) ~ 1 - 1.5e-5.
_EMPTY_VOCAB, _EMPTY_X = 1024, 1023


@functools.lru_cache(maxsize=1)
def empty_residual_seed(search: int = 1 << 19) -> int:
    """A seed (position 0) that rejects x, where the oracle's residual draw (over the 1023 tokens
    off x) equals the fallback draw over the target row, and is not token 0."""
    from reference import rng

    seeds = np.arange(search, dtype=np.int64)
    eta = rng.accept_uniforms(seeds, np.zeros(search, np.int64), np.arange(search + 1, dtype=np.int64))
    for seed in seeds[eta >= np.exp(-(2.0**-16)) + 2e-6]:
        uniforms = rng.sampling_uniforms([seed], [0], [0, 1], _EMPTY_VOCAB)[0]
        exponentials = rng.exponential_from_uniform(uniforms)
        score = -np.log(exponentials)
        residual_pick = int(np.argmax(np.where(np.arange(_EMPTY_VOCAB) == _EMPTY_X, -np.inf, score)))
        fallback_pick = int(np.argmax(score - np.where(np.arange(_EMPTY_VOCAB) == _EMPTY_X, 2.0**-16, 0.0)))
        if residual_pick == fallback_pick != 0:
            return int(seed)
    raise RuntimeError("no seed found for the empty-residual case")


def empty_residual_case() -> Case:
    """Token rejection whose float32 residual is empty: the documented fallback (the target row with
    the same uniforms) must be sampled, which here emits what the oracle emits."""
    target = np.zeros((2, _EMPTY_VOCAB), dtype=np.float32)
    target[0, _EMPTY_X] = -(2.0**-16)
    return _case(target, np.zeros((1, _EMPTY_VOCAB)), [_EMPTY_X], [1], [empty_residual_seed()], "token",
                 "crafted: token rejection with an empty float32 residual (fallback to the target row)")


# Shared near-one-hot mode (V = 8, token method, one draft x = 1, T = 1): the target puts logit 0 on
# token 0 and -30 elsewhere (tail 6.5e-13), the draft 0 on token 0, -17 on token 1 and -40 elsewhere
# (tail 4.1e-8). Both tails are below float32's epsilon. x = 1 is rejected (accept ratio 2.3e-6) and
# the residual (b - q)+ is 4.1e-8 on token 0 (the tail difference) against 9.4e-14 on tokens 2..7:
# token 0 is ~13 nats ahead and loses the race only if its exponential is e^13 times another's (about
# 1.4e-5 of draws; tests/harness/test_crafted.py checks this seed's draw). A kernel whose row
# normaliser rounds 1 + tail to 1 sees b(0) = q(0) = 1, an empty residual there, and emits 2..7.
SHARED_MODE_SEED = 7
_MODE_TARGET = np.array([[0.0] + [-30.0] * 7, [0.0] * 8])
_MODE_DRAFT = np.array([[0.0, -17.0] + [-40.0] * 6])


# Shared mode with tails of a few float32 ulps of 1 (V = 8, token method, one draft x = 1, T = 1; u =
# 2^-23): target tail 2.6u on token 2, draft tail 4.4u on x. The residual is 1.8u on the mode 0
# against 2.6u on token 2, so the uniforms decide; with these seeds the oracle emits the mode by more
# than 0.5 nats. A tail formed as (1 + tail) - 1 rounds to 3u and 4u, leaving the mode 1u, and emits
# token 2 (found offline with mutant tail-swallowed-by-max, 13 % of seeds). Tails that round to 0
# instead no longer tell: the deep-tail path recomputes them (shared_mode_case above).
ULP_MODE_SEEDS = (2, 51)
_ULP = 2.0**-23
_ULP_TARGET = np.array([[0.0, -30.0, np.log(2.6 * _ULP)] + [-30.0] * 5, [0.0] * 8])
_ULP_DRAFT = np.array([[0.0, np.log(4.4 * _ULP)] + [-40.0] * 6])


def ulp_mode_case() -> Case:
    reqs = len(ULP_MODE_SEEDS)
    return _case(np.tile(_ULP_TARGET, (reqs, 1)), np.tile(_ULP_DRAFT, (reqs, 1)), [1] * reqs, [1] * reqs,
                 list(ULP_MODE_SEEDS), "token",
                 "crafted: rejection whose residual on a shared mode is the difference of tails a few "
                 "float32 ulps of 1 wide")


def shared_mode_case() -> Case:
    return _case(_MODE_TARGET, _MODE_DRAFT, [1], [1], [SHARED_MODE_SEED], "token",
                 "crafted: rejection whose residual lives on a mode shared by near-one-hot target and "
                 "draft rows (tails below float32's epsilon)")


# Deep tails (V = 8, token method, one draft x = 1 per request, T = 1e-6, float32 logits): at
# logits / T the mode 0 sits at 0; draft row r puts -DEEP_DRAFT_TAILS[r] on token 1 and -2000
# elsewhere, the target puts -1110 on tokens 1..7 (request 2: -435.6 on 2..7, -3000 on token 1).
# x = 1 is rejected (b/q <= e^-310). Requests 0 and 1: the residual is the draft's tail (e^-435.6,
# below float32; e^-800, below float64 too) on the mode against e^-1110 on tokens 2..7, so 0 wins by
# hundreds of nats whatever the uniforms; float32 (or float64) tails see an empty mode and emit 2..7.
# Request 2, the mirror: no residual on the mode. Found by `harness check --profile gpu --seed 14`
# (a bf16 row at T = 7e-7 with tails e^-435.6 and e^-1110).
DEEP_TEMPERATURE = 1e-6
DEEP_DRAFT_TAILS = (435.6, 800.0, 1110.0)
_DEEP_VOCAB = 8


def _deep_row(rest_nats: float, token1_nats: float) -> np.ndarray:
    row = np.full(_DEEP_VOCAB, -rest_nats * DEEP_TEMPERATURE)
    row[0] = 0.0
    row[1] = -token1_nats * DEEP_TEMPERATURE
    return row


def deep_tail_logits() -> tuple[np.ndarray, np.ndarray]:
    """``(target [6, 8], draft [3, 8])`` float32 logits of the three requests above."""
    target, draft = [], []
    target_rest, target_x = (1110.0, 1110.0, 435.6), (1110.0, 1110.0, 3000.0)
    for draft_x, rest, x in zip(DEEP_DRAFT_TAILS, target_rest, target_x, strict=True):
        target += [_deep_row(rest, x), _deep_row(5.0, 5.0)]
        draft.append(_deep_row(2000.0, draft_x))
    return np.array(target, dtype=np.float32), np.array(draft, dtype=np.float32)


def deep_tail_case() -> Case:
    target, draft = deep_tail_logits()
    return _case(target, draft, [1, 1, 1], [1, 1, 1], [3, 4, 5], "token",
                 "crafted: rejection whose residual is the draft's tail on a shared mode, with both tails "
                 "below float32's range (one below float64's)", temperatures=[DEEP_TEMPERATURE] * 3)


# Block, 1 - p and Z below float32's epsilon (V = 4, two drafts 0 and 2, T = 1): target row 0 puts
# -18.0218 (2^-26 in probability) on token 1, so p_1 = 1/(1 + 2^-26), which float32 rounds to 1;
# row 1 shares its mode 0 with draft row 1, whose tail (3e-8 on token 1) exceeds the target's
# (e^-50), so Z_2 = 1.51e-8 is the mode's residual, h_1 = Z_2 / (Z_2 + 1 - p_1) = 0.503, and
# p_2 = e^-10. Seeds 19, 32, 34 draw eta_1 in h_1 + (0.15, 0.2): the oracle stops at tau = 0 and
# emits token 1. Seeds 6 and 15 draw eta_1 in h_1 - (0.16, 0.26): it accepts x_1 and emits [0, 0].
# 1 - p taken as 1 - exp(log p) = 0 gives h_1 = 1 (the first seeds fail); a Z formed as a float32
# difference of the two near-1 probabilities is 0 (h_1 = 0: the last seeds fail) or a multiple of
# 2^-24 (h_1 >= 0.8: the first fail). Found in review; the regression entry is
# tests/regressions/coupled-exactness-block-one-minus-p-below-float32-epsilon.json.
NEAR_ONE_SEEDS = (19, 32, 34, 6, 15)
_NEAR_ONE_TARGET = np.array([[0.0, -18.021826, -np.inf, -np.inf], [0.0, -np.inf, -50.0, -np.inf],
                             [0.0] * 4])
_NEAR_ONE_DRAFT = np.array([[0.0, -np.inf, -np.inf, -np.inf], [0.0, -17.32207, -40.0, -np.inf]])


def near_one_block_case() -> Case:
    reqs = len(NEAR_ONE_SEEDS)
    return _case(np.tile(_NEAR_ONE_TARGET, (reqs, 1)), np.tile(_NEAR_ONE_DRAFT, (reqs, 1)), [0, 2] * reqs,
                 [2] * reqs, list(NEAR_ONE_SEEDS), "block",
                 "crafted: block h where 1 - p and the residual mass Z are both below float32's epsilon")


# Found offline with reference.verify's ``residual_mass_scale`` (tests/harness/test_crafted.py
# re-derives them): with these seeds (position 0), request i of ``close_draft_logits`` emits another
# output when block verification's stop probabilities are computed from Z / 2 (even i) or 2 Z (odd i),
# in float32, bf16 and fp16 alike.
CLOSE_DRAFT_SEEDS = (67, 4, 238, 1, 57, 7)
CLOSE_DRAFT_K, CLOSE_DRAFT_VOCAB = 4, 300


def close_draft_logits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(target [R (k+1), V], draft [R k, V], ids [R k])`` float64 logits and draft tokens: drafts
    close to the target (draft = target + noise / 2), so ``p_i`` stays between 0 and 1 and the
    residual masses ``Z`` decide stops; ids drawn from the bf16-rounded draft rows."""
    k, vocab, drawn = CLOSE_DRAFT_K, CLOSE_DRAFT_VOCAB, 8
    rng = np.random.default_rng(20261202)
    target = rng.normal(0.0, 1.5, size=(drawn, k + 1, vocab))
    draft = target[:, :k] + 0.5 * rng.normal(size=(drawn, k, vocab))
    rounded = torch.tensor(draft.reshape(-1, vocab), dtype=torch.float32).to(torch.bfloat16)
    q = torch.softmax(rounded.double(), -1)
    ids = torch.multinomial(q, 1, generator=torch.Generator().manual_seed(7))[:, 0].numpy()
    reqs = len(CLOSE_DRAFT_SEEDS)
    return target[:reqs].reshape(-1, vocab), draft[:reqs].reshape(-1, vocab), ids[: reqs * k]


def close_draft_block_case(dtype: torch.dtype) -> Case:
    """Block verification with draft logits close to the target, in ``dtype``, whose seeds make a
    wrong scale of ``Z`` (halved or doubled) change every request's output. v14: a pass 2 that
    halved ``Z`` for 16-bit logits only passed every kernel test and every ci-profile property
    (mutant ``residual-mass-halved-16bit``). V = 300 spans a full and a partial block of the
    interpreter's 256-wide passes."""
    target, draft, ids = close_draft_logits()
    reqs = len(CLOSE_DRAFT_SEEDS)
    batch = VerifyBatch(
        target_logits=torch.tensor(target, dtype=torch.float32).to(dtype),
        draft_logits=torch.tensor(draft, dtype=torch.float32).to(dtype),
        draft_token_ids=torch.from_numpy(ids),
        cu_num_draft_tokens=torch.arange(reqs + 1, dtype=torch.int32) * CLOSE_DRAFT_K,
        temperature=torch.ones(reqs, dtype=torch.float32), seeds=torch.tensor(CLOSE_DRAFT_SEEDS),
        positions=torch.zeros(reqs, dtype=torch.int64), method="block",
    )
    case = case_from_batch(batch)
    case.label = (f"crafted: block verification with {str(dtype).removeprefix('torch.')} draft logits "
                  "close to the target, where a wrong scale of Z moves every request")
    return case


# Bound order against score order (V = 8192, six requests with no drafts, so the race is over the
# bonus row): two tokens hold the row's mass, the winner W at a high column and the runner-up L at a
# low one. Both uniforms are below 1/8 (u_W < 0.01, 0.07 < u_L < 0.115), and the weights are chosen
# so that W wins the race (w / E) while L has the larger w / u: the upper bound a race that skips
# vocabulary blocks may rank blocks by (E >= u, and E / u grows with u). A kernel that skips W's
# block because L's bound is higher, that takes L's bound for a score L reaches, or that stops at
# the first block it cannot rule out (L's, the lower column), emits L. Every other token sits 40
# nats below. Six requests: more than our kernels' small-batch launch takes (kernels/tuning.py
# FUSE_DECIDE_MAX_REQS), so the chunk runs the race launch, which prunes under the interpreter; on a
# GPU only from 2^25 raced entries on (tuning.RACE_PRUNE_MIN_ENTRIES).
RACE_ORDER_VOCAB, RACE_ORDER_WINNER, RACE_ORDER_LOSER, RACE_ORDER_REQUESTS = 8192, 8000, 100, 6


@functools.lru_cache(maxsize=1)
def race_order_design() -> tuple[tuple[int, float], ...]:
    """``(seed, log (w_L / w_W))`` per request: the first seeds with ``u_W < 0.01`` and ``0.07 < u_L <
    0.115``, and a weight ratio halfway (geometrically) between ``u_L / u_W`` and ``E_L / E_W``, so
    the race and the bound disagree both ways by 0.018 nats or more."""
    from reference import rng

    seeds = np.arange(1 << 16, dtype=np.int64)
    u_win, u_lose = (rng.random_uniforms(seeds, 0, rng.SAMPLE_STREAM, column).astype(np.float64)
                     for column in (RACE_ORDER_WINNER, RACE_ORDER_LOSER))
    picked = np.flatnonzero((u_win < 0.01) & (u_lose > 0.07) & (u_lose < 0.115))[:RACE_ORDER_REQUESTS]
    if picked.size < RACE_ORDER_REQUESTS:
        raise RuntimeError("no seeds found for the race-order case")
    e_win, e_lose = -np.log1p(-u_win[picked]), -np.log1p(-u_lose[picked])
    log_ratio = 0.5 * (np.log(u_lose[picked] / u_win[picked]) + np.log(e_lose / e_win))
    return tuple((int(seed), float(r)) for seed, r in zip(seeds[picked], log_ratio, strict=True))


def race_order_log_ratios(dtype: torch.dtype = torch.float32) -> list[float]:
    """The design's ``log (w_L / w_W)`` as logits of ``dtype`` hold them (L's logit; W's is 0)."""
    ratios = torch.tensor([r for _, r in race_order_design()], dtype=torch.float32).to(dtype)
    return ratios.float().tolist()


def race_order_case(method: str, dtype: torch.dtype = torch.float32) -> Case:
    """The design above, logits in ``dtype``: the oracle emits W for every request; ranking blocks by
    bound emits L. A 16-bit copy exists because our pruned race bounds 16-bit blocks by other code
    than float32 ones (kernels/residual_sample.py ``_block_bounds``)."""
    design = race_order_design()
    target = np.full((len(design), RACE_ORDER_VOCAB), -40.0)
    target[:, RACE_ORDER_WINNER] = 0.0
    target[:, RACE_ORDER_LOSER] = race_order_log_ratios(dtype)
    seeds = [seed for seed, _ in design]
    label = "crafted: race winner whose bound w / u is below the runner-up's, in a later block"
    if dtype != torch.float32:
        label += f" ({str(dtype).removeprefix('torch.')})"
    return _case(target, np.zeros((0, RACE_ORDER_VOCAB)), [], [0] * len(design), seeds, method, label,
                 dtype=dtype)


def crafted_cases(methods, dtypes=frozenset({torch.float32})) -> list[Case]:
    """The crafted coupled cases that apply to a kernel claiming ``methods`` and logit ``dtypes``."""
    methods = sorted(methods)
    if not methods:
        return []
    cases = [tiny_uniform_case(methods[0]), race_order_case(methods[0])]
    cases += [race_order_case(methods[0], d) for d in (torch.bfloat16, torch.float16) if d in dtypes]
    if "token" in methods:
        cases += [empty_residual_case(), shared_mode_case(), ulp_mode_case(), deep_tail_case()]
    if "block" in methods:
        cases += [high_eta_block_case(), block_residual_case(), near_one_block_case()]
        cases += [close_draft_block_case(d) for d in (torch.float32, torch.bfloat16, torch.float16)
                  if d in dtypes]
    return cases
