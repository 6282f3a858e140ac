"""Structural judgements of one ``VerifyOutput`` against its batch (DESIGN.md layer 1), as pure functions.

Each function returns ``Violation``s (empty when the output is fine); properties turn them into
findings. ``contract_violations`` is the gate every property passes an output through before it
compares values: an output of the wrong type, shape, dtype or device fails here, with the error in
the report, instead of crashing a comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.contract import VerifyBatch, VerifyOutput


@dataclass
class Violation:
    cls: str  # failure class
    first_field: str  # the first offending output field, e.g. "output_token_ids[2,1]"
    message: str


def _check_tensor(
    name: str, t: object, shape: tuple, dtype: torch.dtype, device: torch.device
) -> list[Violation]:
    if not isinstance(t, torch.Tensor):
        return [Violation("contract_type", name, f"{name} must be a torch.Tensor, got {type(t).__name__}")]
    bad = []
    if tuple(t.shape) != shape:
        bad.append(Violation("contract_shape", name, f"{name} has shape {tuple(t.shape)}, expected {shape}"))
    if t.dtype != dtype:
        bad.append(Violation("contract_dtype", name, f"{name} has dtype {t.dtype}, expected {dtype}"))
    if t.device.type != device.type:
        bad.append(Violation("contract_device", name, f"{name} is on {t.device}, expected {device}"))
    return bad


def contract_violations(batch: VerifyBatch, out: object, logprobs_claimed: bool) -> list[Violation]:
    """Type, shape, dtype and device of every output field."""
    if not isinstance(out, VerifyOutput):
        return [
            Violation("contract_type", "output", f"verify returned {type(out).__name__}, not VerifyOutput")
        ]
    width = batch.max_draft_len + 1
    bad = _check_tensor(
        "output_token_ids", out.output_token_ids, (batch.num_reqs, width), torch.int64, batch.device
    )
    bad += _check_tensor("num_emitted", out.num_emitted, (batch.num_reqs,), torch.int32, batch.device)
    if batch.want_logprobs and logprobs_claimed:
        bad += _check_tensor("logprobs", out.logprobs, (batch.num_reqs, width), torch.float32, batch.device)
    return bad


def _at(name: str, r: int, j: int | None = None) -> str:
    return f"{name}[{r}]" if j is None else f"{name}[{r},{j}]"


def value_violations(batch: VerifyBatch, out: VerifyOutput, logprobs_claimed: bool) -> list[Violation]:
    """``num_emitted`` range, accepted prefix == drafts, ids in ``[0, V)``, ``-1`` padding, logprobs.

    Assumes ``contract_violations`` found nothing.
    """
    bad: list[Violation] = []
    ids = out.output_token_ids.cpu()
    emitted = out.num_emitted.cpu().tolist()
    drafts = batch.draft_token_ids.cpu()
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    vocab = batch.vocab_size
    lp = out.logprobs.cpu() if (batch.want_logprobs and logprobs_claimed) else None
    for r, n in enumerate(emitted):
        k = cu[r + 1] - cu[r]
        if not 1 <= n <= k + 1:
            bad.append(
                Violation(
                    "num_emitted_range",
                    _at("num_emitted", r),
                    f"num_emitted[{r}] = {n}, must lie in [1, {k + 1}]",
                )
            )
            continue
        row = ids[r].tolist()
        outside = [j for j in range(n) if not 0 <= row[j] < vocab]
        if outside:
            j = outside[0]
            what = "accepted draft" if j < n - 1 else "emitted id"
            bad.append(
                Violation(
                    "id_out_of_range",
                    _at("output_token_ids", r, j),
                    f"{what} {row[j]} at slot {j} of request {r} is outside [0, {vocab})",
                )
            )
        for j in range(n - 1):
            if row[j] != int(drafts[cu[r] + j]):
                bad.append(
                    Violation(
                        "prefix_not_drafts",
                        _at("output_token_ids", r, j),
                        f"accepted token {j} of request {r} is {row[j]}, "
                        f"but the draft is {int(drafts[cu[r] + j])}",
                    )
                )
                break
        tail = row[n:]
        if any(x != -1 for x in tail):
            j = n + next(i for i, x in enumerate(tail) if x != -1)
            bad.append(
                Violation(
                    "padding_not_minus_one",
                    _at("output_token_ids", r, j),
                    f"slot {j} of request {r} holds {row[j]} past num_emitted = {n}; padding must be -1",
                )
            )
        if lp is not None:
            vals = lp[r]
            head, pad = vals[:n], vals[n:]
            if not bool(torch.isfinite(head).all()) or bool((head > 1e-6).any()):
                j = int(torch.nonzero(~torch.isfinite(head) | (head > 1e-6))[0])
                bad.append(
                    Violation(
                        "logprob_invalid",
                        _at("logprobs", r, j),
                        f"logprob {float(vals[j])} of emitted slot {j} of request {r} "
                        "is not a finite value <= 0",
                    )
                )
            if bool((pad != 0.0).any()):
                j = n + int(torch.nonzero(pad != 0.0)[0])
                bad.append(
                    Violation(
                        "logprob_padding",
                        _at("logprobs", r, j),
                        f"logprob padding at slot {j} of request {r} is {float(vals[j])}, must be 0.0",
                    )
                )
    return bad


def support_violations(batch: VerifyBatch, out: VerifyOutput) -> list[Violation]:
    """Tokens the target gives probability exactly 0 (a ``-inf`` logit) are never accepted or emitted.

    Applies to sampled rows (``T > 0``) whose target row has no NaN and at least one finite logit;
    greedy rows are judged exactly elsewhere. Catches ``u == 0`` acceptance, inclusive compares,
    unclamped residuals and padded-vocab tails (BUGS.md #8, #9, #10).
    """
    bad: list[Violation] = []
    target = batch.target_logits.float().cpu()
    ids = out.output_token_ids.cpu()
    emitted = out.num_emitted.cpu().tolist()
    cu = batch.cu_num_draft_tokens.cpu().tolist()
    temps = batch.temperature.cpu().tolist()
    for r, n in enumerate(emitted):
        if temps[r] == 0.0:
            continue
        for j in range(min(n, cu[r + 1] - cu[r] + 1)):
            row = target[cu[r] + r + j]
            if bool(torch.isnan(row).any()) or bool(torch.isneginf(row).all()):
                continue
            tok = int(ids[r, j])
            if 0 <= tok < row.numel() and bool(torch.isneginf(row[tok])):
                what = "accepted draft" if j < n - 1 else "emitted token"
                bad.append(
                    Violation(
                        "zero_probability_token",
                        _at("output_token_ids", r, j),
                        f"{what} {tok} at slot {j} of request {r} has target probability 0 (logit -inf)",
                    )
                )
                break
    return bad


def guard_violations(guards: dict, cls: str, who: str) -> list[Violation]:
    """One ``cls`` violation when any guard band of ``guards`` (name ->
    ``harness.execution.guard_bands.Guarded``)
    changed: ``who`` wrote outside its tensors."""
    broken = [name for name, g in guards.items() if not g.intact()]
    if not broken:
        return []
    return [Violation(cls, broken[0], f"{who} wrote into the guard bands around {broken}")]


def first_difference(a: VerifyOutput, b: VerifyOutput, with_logprobs: bool) -> str | None:
    """The first field where two outputs differ bit for bit (``None`` when identical)."""
    if a.num_emitted.shape != b.num_emitted.shape or a.output_token_ids.shape != b.output_token_ids.shape:
        return "shape"
    ne = torch.nonzero(a.num_emitted.cpu() != b.num_emitted.cpu())
    if ne.numel():
        return f"num_emitted[{int(ne[0])}]"
    ids = torch.nonzero(a.output_token_ids.cpu() != b.output_token_ids.cpu())
    if ids.numel():
        return f"output_token_ids[{int(ids[0, 0])},{int(ids[0, 1])}]"
    if with_logprobs and a.logprobs is not None and b.logprobs is not None:
        la, lb = a.logprobs.cpu(), b.logprobs.cpu()
        same = (la == lb) | (torch.isnan(la) & torch.isnan(lb))
        diff = torch.nonzero(~same)
        if diff.numel():
            return f"logprobs[{int(diff[0, 0])},{int(diff[0, 1])}]"
    return None
