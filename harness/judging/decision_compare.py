"""Compare a kernel's decisions with the oracle's, telling float32 near-ties from real disagreements.

For each request the first disagreement is traced to ONE oracle decision (docs/interfaces.md
section 2 defines the margins ``reference.verify`` reports):
- different accepted counts ``a_k != a_r``: token verification disagrees at draft slot ``min(a)``
  (one side accepted it, the other rejected it); block verification at slot ``max(a) - 1`` (the side
  with more accepted tokens passed it, the other cannot have);
- same count, different emitted token: the sampling race of the emitting row.
A disagreement is a *tie* when that decision's margin is within the float32 tolerance of its
threshold; ties are counted and reported, never hidden. Greedy decisions have no tolerance: the
argmax of identical raw logits is exact, and exact ties resolve to the lowest index.

Tolerances scale with ``S`` = the largest finite ``|logit| / T`` the request's rows feed into exp:
a float32 softmax has relative error of about ``2**-23 * S`` in every probability. Logprobs are
compared with the tolerance table of harness/judging/tolerances.py (as ``law_consequences`` does); the
disagreement's ``tolerance`` is the bound that was exceeded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from harness.contract import VerifyBatch, VerifyOutput
from harness.judging.tolerances import exponent_scale_of_rows, logprob_tolerance
from reference.verify import ReferenceResult

EPS32 = 2.0**-23
BASE_ACCEPT_TOL = 1e-6
BASE_SAMPLE_TOL = 1e-4


@dataclass
class Disagreement:
    request: int
    first_field: str
    kind: str  # "accept" | "sample" | "greedy" | "logprob" | "structure"
    margin: float
    tolerance: float
    kernel_tokens: list
    reference_tokens: list

    @property
    def is_tie(self) -> bool:
        return self.kind != "greedy" and bool(np.isfinite(self.margin)) and abs(self.margin) <= self.tolerance


@dataclass
class DecisionComparison:
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def ties(self) -> list[Disagreement]:
        return [d for d in self.disagreements if d.is_tie]

    @property
    def real(self) -> list[Disagreement]:
        return [d for d in self.disagreements if not d.is_tie]


def exponent_scale(batch: VerifyBatch) -> np.ndarray:
    """Per request, the largest finite ``|logit| / T`` (``|logit|`` for greedy) over its rows."""
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    temps = batch.temperature.cpu().double().numpy()
    target = batch.target_logits.detach().cpu().double().numpy()
    draft = None if batch.draft_logits is None else batch.draft_logits.detach().cpu().double().numpy()
    scale = np.zeros(len(temps))
    for r in range(len(temps)):
        rows = [target[cu[r] + r : cu[r + 1] + r + 1]]
        if draft is not None:
            rows.append(draft[cu[r] : cu[r + 1]])
        vals = np.concatenate([x.ravel() for x in rows])
        vals = np.abs(vals[np.isfinite(vals)])
        biggest = float(vals.max()) if vals.size else 0.0
        scale[r] = biggest / temps[r] if temps[r] > 0 else biggest
    return scale


def compare_decisions(
    batch: VerifyBatch, out: VerifyOutput, ref: ReferenceResult, compare_logprobs: bool
) -> DecisionComparison:
    """Every request whose output differs from the oracle's, with the margin of the decision at fault."""
    result = DecisionComparison()
    ids = out.output_token_ids.cpu().numpy()
    emitted = out.num_emitted.cpu().numpy().astype(np.int64)
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    greedy = batch.temperature.cpu().numpy() == 0.0
    rel = BASE_ACCEPT_TOL + 4 * EPS32 * exponent_scale(batch)
    vocab = batch.vocab_size
    lp_tol = logprob_tolerance(batch.target_logits.dtype)  # the one table (harness/judging/tolerances.py)
    for r in range(batch.num_reqs):
        nk, nr = int(emitted[r]), int(ref.num_emitted[r])
        tok_k, tok_r = ids[r, :nk].tolist(), ref.output_token_ids[r, :nr].tolist()
        k = cu[r + 1] - cu[r]
        drafts = batch.draft_token_ids[cu[r] : cu[r + 1]].cpu().tolist()
        if not 1 <= nk <= k + 1 or tok_k[: nk - 1] != drafts[: nk - 1] or not 0 <= tok_k[-1] < vocab:
            # Not a decision at all (an impossible count, an accepted prefix that is not the draft, an
            # id outside [0, V)): no margin can excuse it.
            bad_prefix = [j for j in range(max(nk - 1, 0)) if tok_k[j] != drafts[j]] if nk <= k + 1 else []
            where = f"output_token_ids[{r},{bad_prefix[0]}]" if bad_prefix else f"num_emitted[{r}]"
            result.disagreements.append(Disagreement(r, where, "structure", float("nan"), 0.0, tok_k, tok_r))
        elif nk != nr:
            slot = min(nk, nr) - 1 if batch.method == "token" else max(nk, nr) - 2
            slot = min(max(slot, 0), max(k - 1, 0))
            margin = float(ref.accept_margins[cu[r] + slot]) if k else float("nan")
            tol = 4 * rel[r] if batch.method == "token" else 16 * (k + 1) * rel[r] + 1e-5
            kind = "greedy" if greedy[r] else "accept"
            result.disagreements.append(Disagreement(r, f"num_emitted[{r}]", kind, margin, tol, tok_k, tok_r))
        elif tok_k != tok_r:
            j = next(i for i, (a, b) in enumerate(zip(tok_k, tok_r, strict=False)) if a != b)
            kind = "greedy" if greedy[r] else "sample"
            tol = BASE_SAMPLE_TOL + 64 * rel[r]
            result.disagreements.append(
                Disagreement(
                    r, f"output_token_ids[{r},{j}]", kind, float(ref.sample_margins[r]), tol, tok_k, tok_r
                )
            )
        elif compare_logprobs and out.logprobs is not None and ref.logprobs is not None:
            lk = out.logprobs[r, :nk].detach().cpu().double().numpy()
            lr = ref.logprobs[r, :nr]
            rows = batch.target_logits[cu[r] + r : cu[r] + r + nr].detach().cpu().double().numpy()
            t = float(batch.temperature[r])
            tol = np.array([lp_tol.bound(exponent_scale_of_rows(rows[j], t), lr[j]) for j in range(nr)])
            bad = np.nonzero(~(np.abs(lk - lr) <= tol))[0]
            if bad.size:
                j = int(bad[0])
                result.disagreements.append(
                    Disagreement(r, f"logprobs[{r},{j}]", "logprob", float(lk[j] - lr[j]), float(tol[j]),
                                 tok_k, tok_r)
                )
    return result


def uniform_problems(batch: VerifyBatch, accept: object, sample: object) -> list[str]:
    """What is wrong with a kernel's ``random_draws`` (shapes, dtype, values outside (0, 1))."""
    problems = []
    for name, t, shape in (
        ("accept_uniforms", accept, (batch.num_draft_total,)),
        ("sampling_uniforms", sample, (batch.num_logits, batch.vocab_size)),
    ):
        if not isinstance(t, torch.Tensor):
            problems.append(f"{name} is {type(t).__name__}, not a tensor")
            continue
        if tuple(t.shape) != shape or t.dtype != torch.float32:
            problems.append(f"{name} is {t.dtype} {tuple(t.shape)}, expected float32 {shape}")
            continue
        if t.numel() and not bool(((t > 0) & (t < 1)).all()):
            bad = t[~((t > 0) & (t < 1))]
            problems.append(f"{name} has {bad.numel()} values outside (0, 1), e.g. {float(bad[0])}")
    return problems


def near_tie_requests(batch: VerifyBatch, ref: ReferenceResult) -> set[int]:
    """Requests with ANY sampled decision within float32 tolerance of its threshold under ``ref``.

    Two computations that are equal in exact arithmetic (block vs token at ``g == 1``, a point mass
    vs one-hot draft logits) may round differently; they may then disagree only at such requests.
    """
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    greedy = batch.temperature.cpu().numpy() == 0.0
    rel = BASE_ACCEPT_TOL + 4 * EPS32 * exponent_scale(batch)
    found = set()
    for r in range(batch.num_reqs):
        if greedy[r]:
            continue
        k = cu[r + 1] - cu[r]
        margins = np.abs(ref.accept_margins[cu[r] : cu[r + 1]])
        margins = margins[np.isfinite(margins)]
        if (margins.size and margins.min() <= 16 * (k + 1) * rel[r] + 1e-5) or abs(
            ref.sample_margins[r]
        ) <= BASE_SAMPLE_TOL + 64 * rel[r]:
            found.add(r)
    return found
