"""What the exact law fixes once a kernel's emitted ids are known, judged against the float64 oracle
without sharing the kernel's randomness (SPEC.md sections 1-3; issue 33).

A kernel without ``random_draws`` cannot be replayed decision by decision, but much of its output is
still determined, or constrained to a set, by the ids it emitted. ``consequence_violations`` judges
one output on every such fact (pure function; ``Tally`` counts what was judged):

- ``logprob_value``: each emitted token's logprob equals ``log_softmax(logits / T)`` of the row it was
  emitted from (raw logits for greedy rows), within ``harness.judging.tolerances.LOGPROB_TOLERANCE`` of the
  logit dtype;
- ``greedy_not_argmax``: a greedy row (``T == 0``) accepts exactly the drafts that are the lowest-index
  argmax of their rows, up to the first that is not, and then emits that row's argmax (a kernel whose
  tie rule is "any", ``Capabilities.greedy_ties``: any maximum, ``greedy_output_ok``);
- ``token_rejected_sure_accept``: token verification accepts every draft with ``b(x) > q(x)``
  (``u * q(x) < q(x) < b(x)`` for every ``u < 1``), so such a draft is never the rejected one;
- ``correction_is_rejected_draft`` / ``correction_outside_residual``: a correction is drawn from the
  residual ``(s b - q)_+`` of the rejected position (token: ``s = 1``; block: ``s = p_tau``), so it
  is a token where ``s b > q``; in particular never the draft just rejected (point mass: the residual
  is ``b`` with ``x`` zeroed; draft logits: a rejection implies ``b(x) < q(x)``);
- ``block_rejected_sure_accept``: in block verification ``p_i == 1`` gives ``h_i = 1`` (``h_g = p_g``;
  for ``i < g`` ``Z / Z`` or the ``0 / 0 := 1`` convention), and ``eta_i <= 1`` always, so
  ``tau >= max{i : p_i == 1}``;
- ``block_stop_impossible``: ``tau = i >= 1`` needs ``h_i > 0``, i.e. a non-empty block residual
  ``Z_{i+1} = sum (p_i b_{i+1} - q_{i+1})_+ > 0``.
Zero-probability tokens (``-inf`` logits) and the contract are judged by harness/judging/output_checks.py.

Float32 kernels compute these quantities with rounding, so a relation is asserted only where it is
robust: a ratio or residual term counts as ``> 1`` / ``> 0`` / ``== 0`` only when it clears the
decision slack of harness/judging/decision_compare.py (log-space ``16 (k + 1) rel + 1e-5`` with ``rel`` from
the request's largest ``|logit| / T``; ``p_tau`` is carried as an interval; a ratio of
probabilities below float32's normal range is not decided), and a correction is
judged only when the robust part of its residual has mass >= ``MASS_FLOOR`` (a float32 kernel may
find a smaller residual empty and fall back to the target row, docs/interfaces.md section 1).
Requests with degenerate rows (NaN, ``+inf``, all ``-inf``; interfaces.md section 3) or draft ids
outside ``[0, V)`` are not judged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from harness.contract import VerifyBatch, VerifyOutput
from harness.judging.decision_compare import BASE_ACCEPT_TOL, EPS32, exponent_scale
from harness.judging.output_checks import Violation
from harness.judging.tolerances import exponent_scale_of_rows, logprob_tolerance
from reference.probs import effective_temperature, greedy_argmax, log_softmax_rows

# A residual whose robust mass is below this may be empty in float32 (then the documented fallback
# samples the target row): its correction is not judged. float32 resolves 1e-6 with ~17 bits to spare.
MASS_FLOOR = 1e-6
LOG_TINY32 = float(np.log(np.finfo(np.float32).tiny))  # log 2^-126 = -87.3


@dataclass
class Consequence(Violation):
    evidence: dict = field(default_factory=dict)


@dataclass
class Tally:
    """How many judgements of each kind were made (a check that never runs proves nothing)."""

    counts: Counter = field(default_factory=Counter)

    def add(self, kind: str, n: int = 1) -> None:
        self.counts[kind] += n


def _f64(t) -> np.ndarray | None:
    return None if t is None else t.detach().cpu().double().numpy()


def _degenerate(rows: np.ndarray) -> bool:
    return bool(np.isnan(rows).any() or np.isposinf(rows).any() or np.isneginf(rows).all(axis=-1).any())


def _log_ratio(lb: float, lq: float) -> float:
    """``log(b(x) / q(x))`` with the conventions of docs/interfaces.md section 2 (``b == 0``: ``-inf``;
    ``q == 0 < b``: ``+inf``), or NaN where float32 cannot decide it: a probability below float32's
    normal range (``LOG_TINY32``) is 0 to a kernel that compares ``u * q < b`` in probability space,
    as SPEC.md section 6 allows (float64 itself underflows at ``e^-745``)."""
    if lb == -np.inf:
        return -np.inf
    if lb < LOG_TINY32 or LOG_TINY32 > lq > -np.inf:
        return np.nan
    return np.inf if lq == -np.inf else lb - lq


def _clipped_walk(log_ratios: list[float], shift: float) -> np.ndarray:
    """``log p_0..log p_k`` of block verification, each step's ``log r`` moved by ``shift`` (``-slack``:
    a lower bound of what any float32 kernel computes, undecidable ratios taken as 0; ``+slack``: an
    upper bound, undecidable ratios taken as infinite)."""
    log_p = np.zeros(len(log_ratios) + 1)
    for i, lr in enumerate(log_ratios, start=1):
        if np.isnan(lr):
            lr = -np.inf if shift < 0 else np.inf
        stuck = log_p[i - 1] == -np.inf or lr == -np.inf  # p is 0 from here on
        log_p[i] = -np.inf if stuck else min(log_p[i - 1] + lr + shift, 0.0)
    return log_p


@dataclass
class _Request:
    """One request's rows and output, float64."""

    r: int
    k: int
    temperature: float
    target: np.ndarray  # [k+1, V] raw logits
    draft: np.ndarray | None  # [k, V] raw logits or None (point masses)
    drafts: list[int]
    emitted: list[int]
    slack: float


def consequence_violations(
    batch: VerifyBatch, out: VerifyOutput, logprobs_claimed: bool, tally: Tally | None = None,
    greedy_ties: str = "lowest",
) -> list[Consequence]:
    """Every violation of the facts in the module docstring (the contract must already hold);
    ``greedy_ties``: the kernel's tie rule for greedy rows (``Capabilities.greedy_ties``)."""
    tally = tally if tally is not None else Tally()
    target, draft = _f64(batch.target_logits), _f64(batch.draft_logits)
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    temps = batch.temperature.cpu().double().numpy()
    draft_ids = batch.draft_token_ids.cpu().tolist()
    ids = out.output_token_ids.cpu().tolist()
    emitted = out.num_emitted.cpu().tolist()
    lp = out.logprobs.cpu().double().numpy() if (batch.want_logprobs and logprobs_claimed) else None
    scale = exponent_scale(batch)
    vocab = batch.vocab_size
    bad: list[Consequence] = []
    for r in range(batch.num_reqs):
        k, n = cu[r + 1] - cu[r], emitted[r]
        rows = target[cu[r] + r : cu[r + 1] + r + 1]
        drows = None if draft is None else draft[cu[r] : cu[r + 1]]
        drafts = draft_ids[cu[r] : cu[r + 1]]
        if _degenerate(rows) or (drows is not None and k and _degenerate(drows)):
            tally.add("requests not judged (degenerate rows)")
            continue
        if any(not 0 <= x < vocab for x in drafts) or not 1 <= n <= k + 1:
            continue
        rel = BASE_ACCEPT_TOL + 4 * EPS32 * float(scale[r])
        req = _Request(r, k, float(temps[r]), rows, drows, drafts, ids[r][:n], 16 * (k + 1) * rel + 1e-5)
        log_b = log_softmax_rows(rows, effective_temperature(np.full(k + 1, req.temperature)))
        if lp is not None:
            bad += _logprob_violations(batch, req, log_b, lp[r], tally)
        if req.temperature == 0.0:
            bad += _greedy_violations(req, tally, greedy_ties)
        elif batch.method == "token":
            bad += _token_violations(req, log_b, _log_draft(req, vocab), tally)
        else:
            bad += _block_violations(req, log_b, _log_draft(req, vocab), tally)
    return bad


def _log_draft(req: _Request, vocab: int) -> np.ndarray:
    """``log q`` rows ``[k, V]``: temperature-scaled draft rows, or point masses on the drafts."""
    if req.draft is None:
        rows = np.full((req.k, vocab), -np.inf)
        rows[np.arange(req.k), req.drafts] = 0.0
        return rows
    return log_softmax_rows(req.draft, np.full(req.k, req.temperature)) if req.k else np.zeros((0, vocab))


def _logprob_violations(batch, req: _Request, log_b: np.ndarray, lp_row: np.ndarray, tally: Tally):
    tol = logprob_tolerance(batch.target_logits.dtype)
    temperature = float(effective_temperature(req.temperature))
    for j, tok in enumerate(req.emitted):
        want = float(log_b[j, tok])
        if not np.isfinite(want):
            continue  # a zero-probability token: output_checks.support_violations reports it
        scale = exponent_scale_of_rows(req.target[j], temperature)
        bound = tol.bound(scale, want)
        tally.add("logprobs compared")
        got = float(lp_row[j])
        if not abs(got - want) <= bound:
            return [
                Consequence(
                    "logprob_value",
                    f"logprobs[{req.r},{j}]",
                    f"logprob of token {tok} at slot {j} of request {req.r} is {got:.6g}; the oracle's "
                    f"log_softmax of its row{' (raw: greedy)' if req.temperature == 0 else ''} gives "
                    f"{want:.6g} (|difference| {abs(got - want):.3g} > tolerance {bound:.3g})",
                    evidence={"request": req.r, "slot": j, "token": tok, "kernel_logprob": got,
                              "oracle_logprob": want, "difference": got - want, "tolerance": bound,
                              "scale_S": scale, "temperature": req.temperature,
                              "logit_dtype": str(batch.target_logits.dtype), **tol.describe()},
                )
            ]
    return []


def row_maxima(row) -> set[int]:
    """The ids of a raw-logit row's maximal entries (NaN as ``-inf``; every id when none is finite)."""
    z = np.asarray(row, dtype=np.float64)
    z = np.where(np.isnan(z), -np.inf, z)
    return {int(i) for i in np.flatnonzero(z == z.max())}


def greedy_output_ok(target_rows, drafts: list[int], emitted: list[int], ties: str) -> bool:
    """Whether ``emitted`` is a greedy request's output under the kernel's tie rule
    (``Capabilities.greedy_ties``): "lowest" exactly the lowest-index argmax rule; "any" accepted
    drafts that are maxima of their rows, then a maximum of the next row in the place of its draft
    (a draft that is itself a maximum may be rejected only for another maximum)."""
    argmax, _ = greedy_argmax(target_rows)
    if ties != "any":
        tau = 0
        while tau < len(drafts) and drafts[tau] == int(argmax[tau]):
            tau += 1
        return emitted == [*drafts[:tau], int(argmax[tau])]
    if not emitted or len(emitted) > len(drafts) + 1:
        return False
    tau = len(emitted) - 1
    if emitted[:tau] != drafts[:tau]:
        return False
    if any(d not in row_maxima(target_rows[j]) for j, d in enumerate(drafts[:tau])):
        return False
    last = emitted[tau]
    return last in row_maxima(target_rows[tau]) and (tau == len(drafts) or last != drafts[tau])


def _greedy_violations(req: _Request, tally: Tally, ties: str = "lowest") -> list[Consequence]:
    if ties == "any" and greedy_output_ok(req.target, req.drafts, req.emitted, ties):
        tally.add("greedy requests")
        return []
    argmax, _ = greedy_argmax(req.target)
    tau = 0
    while tau < req.k and req.drafts[tau] == int(argmax[tau]):
        tau += 1
    want = [*req.drafts[:tau], int(argmax[tau])]
    tally.add("greedy requests")
    if req.emitted == want:
        return []
    j = next((i for i, (a, b) in enumerate(zip(req.emitted, want, strict=False)) if a != b),
             min(len(req.emitted), len(want)) - 1)
    return [
        Consequence(
            "greedy_not_argmax",
            f"output_token_ids[{req.r},{j}]",
            f"greedy request {req.r} emitted {req.emitted}; the lowest-index argmax rule gives {want}"
            + (" (and it is no maximum where a tie would allow another)" if ties == "any" else ""),
            evidence={"request": req.r, "kernel_tokens": req.emitted, "reference_tokens": want,
                      "drafts": req.drafts},
        )
    ]


def _sure_accept(req: _Request, kind: str, slot: int, bound: int, log_ratio: float) -> Consequence:
    rule = ("token verification accepts every draft with b(x) > q(x) (u * q(x) < b(x) for all u < 1)"
            if kind == "token" else
            f"block verification has p_{bound} = 1, so h_{bound} = 1 and tau >= {bound} whatever eta")
    return Consequence(
        f"{kind}_rejected_sure_accept",
        f"num_emitted[{req.r}]",
        f"request {req.r} accepted {len(req.emitted) - 1} of {req.k} drafts, but {rule} "
        f"(log b(x)/q(x) = {log_ratio:.4g} at slot {slot}, slack {req.slack:.3g})",
        evidence={"request": req.r, "tau": len(req.emitted) - 1, "slot": slot, "log_ratio": log_ratio,
                  "must_accept_through": bound, "slack": req.slack, "drafts": req.drafts},
    )


def _correction_violations(
    req: _Request, row: int, log_b: np.ndarray, log_q: np.ndarray, log_s: tuple[float, float], tally: Tally,
    block: bool = False,
) -> list[Consequence]:
    """Judge the correction at ``row`` drawn from ``(s b - q)_+`` with ``log s`` in ``[lo, hi]`` (and,
    for ``block``, the stop at ``row`` itself). A token residual ``(b - q)_+`` is never empty."""
    lo, hi = log_s
    lb, lq = log_b[row], log_q[row]
    with np.errstate(invalid="ignore"):
        zero = (lb == -np.inf) | (hi + lb - lq <= -req.slack)
        positive = (lb > -np.inf) & (lo + lb - lq >= req.slack)
    if req.draft is None:
        zero[req.drafts[row]] = True  # (s b(x) - 1)_+ == 0 exactly for s, b(x) <= 1
        positive[req.drafts[row]] = False
    x, y = req.drafts[row], req.emitted[-1]
    where = f"output_token_ids[{req.r},{row}]"
    evidence = {"request": req.r, "slot": row, "token": y, "rejected_draft": x, "log_scale": [lo, hi],
                "slack": req.slack}
    if block and row >= 1:
        tally.add("block stops judged")
    if block and row >= 1 and zero.all():
        return [Consequence(
            "block_stop_impossible", f"num_emitted[{req.r}]",
            f"request {req.r} stopped after {row} accepted drafts, but its block residual at slot {row} "
            f"is empty (p_{row} b <= q everywhere), so h_{row} = 0 and eta <= h_{row} is impossible",
            evidence=evidence)]
    with np.errstate(over="ignore"):
        mass = float(np.sum(np.exp(lo + lb[positive]) - np.exp(lq[positive])))
    if mass < MASS_FLOOR:
        tally.add("corrections not judged (residual below the mass floor)")
        return []
    tally.add("corrections judged")
    if not zero[y]:
        return []
    evidence.update(log_target=float(lb[y]), log_draft=float(lq[y]), robust_residual_mass=mass)
    if y == x:
        return [Consequence(
            "correction_is_rejected_draft", where,
            f"request {req.r} rejected draft {x} at slot {row} and then emitted it as the correction; "
            "the residual is 0 there (point mass: x is zeroed; draft logits: a rejection needs b(x) < q(x))",
            evidence=evidence)]
    return [Consequence(
        "correction_outside_residual", where,
        f"request {req.r} emitted correction {y} at slot {row}, where the residual (s b - q)_+ is 0 "
        f"(log s in [{lo:.4g}, {hi:.4g}], log b = {lb[y]:.4g}, log q = {lq[y]:.4g})",
        evidence=evidence)]


def _token_violations(req: _Request, log_b, log_q, tally: Tally) -> list[Consequence]:
    tau = len(req.emitted) - 1
    if tau == req.k:
        return []
    x = req.drafts[tau]
    log_ratio = _log_ratio(float(log_b[tau, x]), float(log_q[tau, x]))
    tally.add("rejections judged")
    if log_ratio >= req.slack:
        return [_sure_accept(req, "token", tau, tau + 1, log_ratio)]
    return _correction_violations(req, tau, log_b, log_q, (0.0, 0.0), tally)


def _block_violations(req: _Request, log_b, log_q, tally: Tally) -> list[Consequence]:
    tau = len(req.emitted) - 1
    ratios = [_log_ratio(float(log_b[i, x]), float(log_q[i, x])) for i, x in enumerate(req.drafts)]
    low, high = _clipped_walk(ratios, -req.slack), _clipped_walk(ratios, req.slack)
    sure = max((i for i in range(1, req.k + 1) if low[i] == 0.0), default=0)
    if req.k:
        tally.add("block scans judged")
    if tau < sure:
        return [_sure_accept(req, "block", sure - 1, sure, ratios[sure - 1])]
    if tau == req.k:
        return []
    return _correction_violations(req, tau, log_b, log_q, (float(low[tau]), float(high[tau])), tally, True)
