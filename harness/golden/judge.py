"""Is one recorded or replayed answer legal? The float64 oracle's verdict, request by request.

``judge(batch, answer, draws)`` returns a ``Judgement`` per request, on one of three bases:

- ``replay``: the uniforms the answer was made with are known (the kernel's ``random_draws``, or
  ``reference.rng``'s when they are bit-identical). The oracle replays every decision
  (``harness.judging.decision_compare.compare_decisions``): the answer is legal when it equals the oracle's,
  or differs only at a decision within the float32 tie margin (a ``tie``, reported with its margin).
- ``greedy``: temperature-0 requests use no randomness; the oracle's answer is exact (no tolerance).
- ``support``: no uniforms (a kernel with its own generator and no ``random_draws``). Only what holds
  for EVERY draw of the uniforms is checked: the accepted prefix equals the drafts and each accepted
  draft has positive target probability; the last token has positive weight in its law (the bonus row
  ``b_{k+1}``; token residual ``(b - q)_+``; block residual ``(p_tau b - q)_+`` with ``p_tau`` from
  the prefix; the target row when the residual is empty), where a weight within the float32 tolerance
  of 0 also counts as positive. Such an answer is "legal in support": a wrong decision that still
  emits a possible token (a biased acceptance, a residual from the wrong row with the same support)
  passes this; only the statistical layer of ``harness check`` can see those.

Logprobs (when the answer has them) are compared with the float64 log-probability of each emitted
token under its temperature-scaled row, with ``compare_decisions``' tolerance. Contract: pure
function of its arguments; never raises for a malformed answer (that is a ``wrong`` judgement).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from harness.contract import VerifyBatch
from harness.golden.file_format import Answer
from harness.judging.decision_compare import BASE_ACCEPT_TOL, EPS32, compare_decisions, exponent_scale
from harness.judging.oracle import reference_draws, run_reference, to_numpy
from reference.probs import effective_temperature, log_softmax_rows, point_mass_log_rows

REPLAY, GREEDY, SUPPORT, STRUCTURE = "replay", "greedy", "support", "structure"


@dataclass
class Judgement:
    legal: bool
    basis: str  # REPLAY | GREEDY | SUPPORT | STRUCTURE
    field: str = ""  # the output field the verdict is about (first bad one when not legal)
    margin: float | None = None  # the deciding margin (tie margin, log-gap or logprob error)
    tolerance: float | None = None
    note: str = ""

    @property
    def tie(self) -> bool:
        return self.legal and self.margin is not None and self.note.startswith("tie")

    def to_json(self) -> dict:
        return {k: v for k, v in vars(self).items() if v not in (None, "")}


def _structure(batch: VerifyBatch, answer: Answer, r: int) -> Judgement | None:
    """A verdict when request ``r``'s output is not a decision at all (else None)."""
    if answer.error is not None:
        return Judgement(False, STRUCTURE, "verify", note=answer.error)
    if answer.ids is None or answer.ids.dim() != 2 or answer.ids.shape[0] != batch.num_reqs:
        return Judgement(False, STRUCTURE, "output_token_ids", note="wrong shape")
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    k, n = cu[r + 1] - cu[r], int(answer.num_emitted[r])
    if not 1 <= n <= min(k + 1, answer.ids.shape[1]):
        return Judgement(False, STRUCTURE, f"num_emitted[{r}]", note=f"{n} outside [1, {k + 1}]")
    toks = answer.ids[r, :n].tolist()
    drafts = batch.draft_token_ids[cu[r] : cu[r + 1]].cpu().tolist()
    for j in range(n - 1):
        if toks[j] != drafts[j]:
            return Judgement(
                False, STRUCTURE, f"output_token_ids[{r},{j}]", note="accepted prefix is not the draft"
            )
    if not 0 <= toks[-1] < batch.vocab_size:
        return Judgement(False, STRUCTURE, f"output_token_ids[{r},{n - 1}]", note="id outside [0, V)")
    if answer.ids.shape[1] != batch.max_draft_len + 1:
        return Judgement(
            False, STRUCTURE, "output_token_ids (shape)", note=f"width {answer.ids.shape[1]}, not max k + 1"
        )
    pad = torch.nonzero(answer.ids[r, n:] != -1)
    if pad.numel():
        return Judgement(
            False, STRUCTURE, f"output_token_ids[{r},{n + int(pad[0])}]", note="padding is not -1"
        )
    if answer.logprobs is not None:
        pad = torch.nonzero(answer.logprobs[r, n:] != 0.0)
        if pad.numel():
            return Judgement(
                False, STRUCTURE, f"logprobs[{r},{n + int(pad[0])}]", note="logprob padding is not 0.0"
            )
    return None


def _rel(batch: VerifyBatch) -> np.ndarray:
    return BASE_ACCEPT_TOL + 4 * EPS32 * exponent_scale(batch)


def _logprob_error(batch: VerifyBatch, answer: Answer, r: int, rel: float) -> Judgement | None:
    """A ``wrong`` judgement when an emitted token's logprob is off by more than the tolerance."""
    if answer.logprobs is None or not batch.want_logprobs:
        return None
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    n = int(answer.num_emitted[r])
    rows = to_numpy(batch.target_logits)[cu[r] + r : cu[r] + r + n].astype(np.float64)
    temp = effective_temperature(float(batch.temperature[r]))
    toks = answer.ids[r, :n].numpy()
    exact = log_softmax_rows(rows, np.full(n, temp))[np.arange(n), toks]
    got = answer.logprobs[r, :n].double().numpy()
    tol = 1e-4 + 16 * rel * (1.0 + np.abs(exact))
    err = np.abs(got - exact)
    bad = np.nonzero(~(err <= tol))[0]
    if bad.size:
        j = int(bad[0])
        return Judgement(
            False, REPLAY, f"logprobs[{r},{j}]", float(got[j] - exact[j]), float(tol[j]), note="logprob off"
        )
    return None


def _support(batch: VerifyBatch, answer: Answer, r: int, rel: float) -> Judgement:
    """Support relations for a sampled request (module docstring)."""
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    k, n = cu[r + 1] - cu[r], int(answer.num_emitted[r])
    temp = float(batch.temperature[r])
    target = to_numpy(batch.target_logits)[cu[r] + r : cu[r + 1] + r + 1].astype(np.float64)
    drafts = to_numpy(batch.draft_token_ids)[cu[r] : cu[r + 1]]
    if np.isnan(target).any() or np.isneginf(target).all(axis=1).any():
        return Judgement(True, SUPPORT, note="degenerate row: any in-range id is documented")
    lb = log_softmax_rows(target, np.full(k + 1, temp))
    if batch.draft_logits is None:
        lq = point_mass_log_rows(drafts, batch.vocab_size)
    else:
        draft = to_numpy(batch.draft_logits)[cu[r] : cu[r + 1]].astype(np.float64)
        lq = log_softmax_rows(draft, np.full(k, temp)) if k else np.zeros((0, batch.vocab_size))
    tau, y = n - 1, int(answer.ids[r, n - 1])
    log_p = 0.0
    for j in range(tau):
        x = int(drafts[j])
        if not np.isfinite(lb[j, x]):
            return Judgement(
                False, SUPPORT, f"output_token_ids[{r},{j}]", note="accepted draft has target probability 0"
            )
        log_p = min(log_p + lb[j, x] - lq[j, x], 0.0) if np.isfinite(lq[j, x]) else 0.0
    if tau == k:
        legal = bool(np.isfinite(lb[k, y]))
        return Judgement(
            legal,
            SUPPORT,
            f"output_token_ids[{r},{tau}]",
            note="bonus token" + ("" if legal else " has target probability 0"),
        )
    log_s = log_p if batch.method == "block" else 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        gaps = log_s + lb[tau] - lq[tau]  # log(s b / q): > 0 where the residual weight is positive
    tol = 16 * (k + 1) * rel + 1e-5
    positive = gaps > tol
    if not positive.any():  # empty (or rounding-level) residual: the target row is the documented law
        legal = bool(np.isfinite(lb[tau, y]))
        return Judgement(legal, SUPPORT, f"output_token_ids[{r},{tau}]", note="residual empty: target row")
    gap = float(gaps[y]) if np.isfinite(lb[tau, y]) else -np.inf
    legal = gap >= -tol
    return Judgement(
        legal,
        SUPPORT,
        f"output_token_ids[{r},{tau}]",
        gap,
        tol,
        note="residual weight " + ("positive" if gap > tol else "rounding-level" if legal else "zero"),
    )


def judge(
    batch: VerifyBatch, answer: Answer, requests: list[int], draws: tuple | None
) -> dict[int, Judgement]:
    """A judgement for each of ``requests`` (see the module docstring for the bases)."""
    out: dict[int, Judgement] = {}
    todo = []
    for r in requests:
        bad = _structure(batch, answer, r)
        if bad is None:
            todo.append(r)
        else:
            out[r] = bad
    if not todo:
        return out
    rel = _rel(batch)
    greedy = batch.temperature.cpu().numpy() == 0.0
    try:
        uniforms = draws if draws is not None else reference_draws(batch)
        ref = run_reference(batch, *uniforms)
        disagreements = {
            d.request: d for d in compare_decisions(batch, answer.to_output(), ref, False).disagreements
        }
    except (ValueError, FloatingPointError) as exc:  # the oracle refuses the batch: support only
        ref, disagreements = None, {}
        note = f"oracle refused the batch: {exc}"
    for r in todo:
        replayable = ref is not None and (greedy[r] or draws is not None)
        if not replayable:
            j = _support(batch, answer, r, rel[r]) if not greedy[r] else Judgement(True, SUPPORT, note=note)
        elif r in disagreements:
            d = disagreements[r]
            basis = GREEDY if greedy[r] else REPLAY
            j = Judgement(
                d.is_tie,
                basis,
                d.first_field,
                d.margin,
                d.tolerance,
                note=("tie: " if d.is_tie else "oracle disagrees: ")
                + f"{d.kind} decision, oracle emits {d.reference_tokens}",
            )
        else:
            j = Judgement(True, GREEDY if greedy[r] else REPLAY, note="equals the oracle")
        bad = _logprob_error(batch, answer, r, rel[r]) if j.legal else None
        if bad is not None:
            bad.basis = j.basis
            j = bad
        out[r] = j
    return out
