"""Seeded random batches for the kernel tests, and the comparison against reference/ with tie margins.

Every batch comes from ``numpy.random.default_rng(seed)``; tests print the seed so a failure is
reproduced by ``make_batch(seed, ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

import kernels
from kernels._device import INTERPRETING, default_device

DEVICE = default_device()

FAMILIES = ("normal", "peaked", "ties", "masked", "shared", "huge", "near")

# float32 decision margins inside which the kernel may disagree with the float64 oracle (a "tie").
ACCEPT_TIE = {"token": 1e-5, "block": 1e-4}
SAMPLE_TIE = 1e-4  # log-domain gap between the best and second-best race score


@dataclass
class Batch:
    seed: int
    target_logits: torch.Tensor
    draft_logits: torch.Tensor | None
    draft_token_ids: torch.Tensor
    cu_num_draft_tokens: torch.Tensor
    temperature: torch.Tensor
    seeds: torch.Tensor
    positions: torch.Tensor
    lengths: list = field(default_factory=list)

    def args(self):
        return (self.target_logits, self.draft_logits, self.draft_token_ids, self.cu_num_draft_tokens,
                self.temperature, self.seeds, self.positions)

    def to(self, device):
        move = lambda t: None if t is None else t.to(device)
        return Batch(self.seed, *(move(a) for a in self.args()), lengths=list(self.lengths))

    def clone(self):
        return Batch(self.seed, *(None if a is None else a.clone() for a in self.args()),
                     lengths=list(self.lengths))


def _logits(rng, rows, vocab, family):
    if family == "ties":
        return rng.integers(-2, 3, size=(rows, vocab)).astype(np.float64)
    x = rng.standard_normal((rows, vocab)) * rng.uniform(0.5, 4.0)
    if family == "peaked":
        x[np.arange(rows), rng.integers(0, vocab, rows)] += 12.0
    if family == "masked":  # -inf tails, but never a whole row
        x[rng.random((rows, vocab)) < 0.6] = -np.inf
        x[np.arange(rows), rng.integers(0, vocab, rows)] = rng.standard_normal(rows)
    if family == "huge":
        x = x * 2500.0  # logits around 1e4
    return x


def make_batch(seed: int, *, num_reqs: int = 3, max_k: int = 4, vocab: int = 300, dtype=torch.float32,
               family: str = "normal", with_draft: bool = True, greedy_fraction: float = 0.25,
               lengths: list | None = None, device=None) -> Batch:
    """A ragged batch: drafts sampled from the draft distribution (point-mass: from the target)."""
    device = device or DEVICE
    rng = np.random.default_rng(seed)
    if lengths is None:
        lengths = [int(k) for k in rng.integers(0, max_k + 1, num_reqs)]
    num_reqs, num_drafts = len(lengths), sum(lengths)
    target = _logits(rng, num_drafts + num_reqs, vocab, family)
    req_of_slot = np.repeat(np.arange(num_reqs), lengths)
    if family == "shared":
        draft = target[np.arange(num_drafts) + req_of_slot]
    elif family == "near":  # a draft model close to the target: block verification's Z and h matter
        draft = target[np.arange(num_drafts) + req_of_slot] + 0.5 * _logits(rng, num_drafts, vocab, "normal")
    else:
        draft = _logits(rng, num_drafts, vocab, family)
    temperature = np.exp(rng.uniform(np.log(1e-8), np.log(100.0), num_reqs)).astype(np.float32)
    temperature[rng.random(num_reqs) < 0.4] = 1.0
    temperature[rng.random(num_reqs) < greedy_fraction] = 0.0
    target_t = torch.tensor(target, dtype=torch.float32).to(dtype)
    draft_t = torch.tensor(draft, dtype=torch.float32).to(dtype)
    # Draft tokens: sampled from the (rounded) draft distribution at the request's temperature.
    source = draft_t.double().numpy() if with_draft else None
    ids = np.zeros(num_drafts, dtype=np.int64)
    slot = 0
    for r, k in enumerate(lengths):
        t = float(temperature[r]) if temperature[r] > 0 else 1.0
        for _ in range(k):
            row = source[slot] if with_draft else target_t[slot + r].double().numpy()
            z = (row - row.max()) / t
            p = np.exp(z)
            p /= p.sum()
            ids[slot] = rng.choice(vocab, p=p)
            slot += 1
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return Batch(
        seed=seed, target_logits=target_t.to(device),
        draft_logits=draft_t.to(device) if with_draft else None,
        draft_token_ids=torch.tensor(ids).to(device), cu_num_draft_tokens=torch.tensor(cu).to(device),
        temperature=torch.tensor(temperature).to(device),
        seeds=torch.tensor(rng.integers(-(2**63), 2**63 - 1, num_reqs, dtype=np.int64)).to(device),
        positions=torch.tensor(rng.integers(0, 2**40, num_reqs, dtype=np.int64)).to(device),
        lengths=lengths,
    )


def reference_result(batch: Batch, method: str, want_logprobs: bool = False):
    from reference import rng, verify

    as_np = lambda t: t.detach().cpu().numpy()
    cu, seeds, pos = as_np(batch.cu_num_draft_tokens), as_np(batch.seeds), as_np(batch.positions)
    u_accept = rng.accept_uniforms(seeds, pos, cu)
    u_sample = rng.sampling_uniforms(seeds, pos, cu, batch.target_logits.shape[1])
    draft = None if batch.draft_logits is None else as_np(batch.draft_logits.float()).astype(np.float64)
    return verify.verify_batch(as_np(batch.target_logits.float()).astype(np.float64), draft,
                               as_np(batch.draft_token_ids), cu, as_np(batch.temperature), u_accept, u_sample,
                               method, want_logprobs=want_logprobs)


@dataclass
class Agreement:
    requests: int = 0
    ties: int = 0
    mismatches: list = field(default_factory=list)


def compare_to_reference(batch: Batch, method: str, out, ref, tally: Agreement) -> None:
    """Decision-by-decision agreement; a disagreeing request counts as a tie only when one of its
    decision margins is within the float32 tolerance. Greedy requests have no tolerance."""
    ids, num, logprobs = (None if t is None else t.cpu().numpy() for t in out)
    cu = batch.cu_num_draft_tokens.cpu().numpy()
    temperature = batch.temperature.cpu().numpy()
    for r in range(len(batch.lengths)):
        tally.requests += 1
        same = num[r] == ref.num_emitted[r] and np.array_equal(ids[r], ref.output_token_ids[r])
        if same:
            if logprobs is not None:
                n = int(num[r])
                np.testing.assert_allclose(logprobs[r, :n], ref.logprobs[r, :n], rtol=1e-4, atol=2e-3,
                                           err_msg=f"seed {batch.seed} request {r} logprobs")
                assert np.all(logprobs[r, n:] == 0.0)
            continue
        margins = np.abs(ref.accept_margins[cu[r]:cu[r + 1]])
        near = np.any(margins[~np.isnan(margins)] < ACCEPT_TIE[method]) or (
            abs(ref.sample_margins[r]) < SAMPLE_TIE)
        if temperature[r] > 0 and near:
            tally.ties += 1
        else:
            tally.mismatches.append(
                f"seed {batch.seed} request {r} (T={temperature[r]}): kernel {ids[r].tolist()} "
                f"n={num[r]} vs reference {ref.output_token_ids[r].tolist()} n={ref.num_emitted[r]}")


def run_kernel(batch: Batch, method: str, **kwargs):
    return kernels.rejection_sample(*batch.args(), method=method, **kwargs)


def stopped_inside(batch: Batch, out) -> int:
    """Requests whose output stopped strictly inside their draft (0 < tau < k): where block
    verification's residual masses Z decide."""
    return sum(0 < n - 1 < k for n, k in zip(out[1].tolist(), batch.lengths, strict=True))


# Launch-path identity tests (one launch against separate launches): the interpreter runs small
# vocabularies (several pass-1 blocks of 256), the GPU real ones.
PATH_SHAPES = ([(300, torch.float32), (1000, torch.bfloat16)] if INTERPRETING
               or DEVICE.type != "cuda"
               else [(32000, torch.bfloat16), (262144, torch.bfloat16), (151936, torch.float32)])
PATH_FAMILIES = (("normal", "shared") if INTERPRETING
                 else ("normal", "peaked", "shared", "masked"))


def assert_same_outputs(a, b, context) -> None:
    """``(ids, num_emitted, logprobs or None)`` of two calls equal bit for bit."""
    for name, x, y in zip(("ids", "num_emitted", "logprobs"), a, b, strict=True):
        assert (x is None and y is None) or torch.equal(x, y), (context, name, x, y)
