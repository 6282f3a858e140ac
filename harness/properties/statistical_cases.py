"""The inputs of the statistical properties: fixed-draft requests, context-dependent model pairs and
large-vocabulary rows, each drawn from a seeded NumPy generator (never a global RNG).

Design choices that give the tests their teeth:
- every position of a request has its OWN target and draft rows (wrong-row bugs change the law);
- acceptance rates are moderate, so every ``tau`` and the bonus row carry real probability;
- a "block trap" request puts ``p_tau`` well below 1 at a likely rejection, where the token residual
  ``(b - q)_+`` and the block residual ``(p b - q)_+`` differ a lot (SPEC.md section 2 traps);
- point-mass requests include a draft token the target gives probability exactly 0 (``-inf``);
- greedy requests contain exact logit ties; tiny temperatures reach 1e-6;
- temperatures differ from 1 wherever draft logits matter (a verifier that forgets to scale the
  draft rows verifies against the wrong ``q``: BUGS.md class 19).
Logits are float32, and the conditional-law suite adds copies of its sampled requests in bfloat16
and float16 (``in_logit_dtype``; for kernels that claim those dtypes): kernels load 16-bit rows
through their own code paths (ours: a different load structure in every pass), so a bug there is
invisible to float32 cases. A copy's values are the 16-bit logits themselves (held exactly in
float32), and its exact laws are computed from those same values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from harness.contract import VerifyBatch
from harness.generation.strategies import lowest_in_domain


@dataclass
class FixedDraftRequest:
    """One request with a fixed draft: ``target [g+1, V]``, ``draft [g, V]`` or None, ``ids [g]``.

    ``target`` and ``draft`` are float32 arrays; ``logit_dtype`` is the dtype the kernel receives them
    in, which must represent every value exactly (``in_logit_dtype`` guarantees it)."""

    label: str
    target: np.ndarray
    draft: np.ndarray | None
    ids: np.ndarray
    temperature: float
    position: int
    logit_dtype: torch.dtype = torch.float32

    @property
    def gamma(self) -> int:
        return int(self.ids.size)

    @property
    def vocab(self) -> int:
        return int(self.target.shape[1])

    def batch(self, method: str, device: torch.device) -> VerifyBatch:
        g = self.gamma
        return VerifyBatch(
            target_logits=torch.from_numpy(self.target).to(device=device, dtype=self.logit_dtype),
            draft_logits=None
            if self.draft is None
            else torch.from_numpy(self.draft).to(device=device, dtype=self.logit_dtype),
            draft_token_ids=torch.from_numpy(self.ids.astype(np.int64)).to(device),
            cu_num_draft_tokens=torch.tensor([0, g], dtype=torch.int32, device=device),
            temperature=torch.tensor([self.temperature], dtype=torch.float32, device=device),
            seeds=torch.zeros(1, dtype=torch.int64, device=device),
            positions=torch.tensor([self.position], dtype=torch.int64, device=device),
            method=method,
        )


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


SIXTEEN_BIT_DTYPES = (torch.bfloat16, torch.float16)
DTYPE_TAGS = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def in_logit_dtype(request: FixedDraftRequest, dtype: torch.dtype) -> FixedDraftRequest:
    """``request`` with its logits rounded to ``dtype`` (round to nearest even, ``-inf`` kept) and
    handed to kernels in that dtype; label ``"<label>@bf16"`` etc. The draft ids are kept: the
    rounding moves probabilities by well under 1 %, so each case keeps the structure it was built for,
    and its law is computed from the rounded values."""

    def rounded(a: np.ndarray | None) -> np.ndarray | None:
        if a is None:
            return None
        return torch.from_numpy(_f32(a)).to(dtype).to(torch.float32).numpy()

    return replace(
        request,
        label=f"{request.label}@{DTYPE_TAGS[dtype]}",
        target=rounded(request.target),
        draft=rounded(request.draft),
        logit_dtype=dtype,
    )


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _position(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 1 << 40))


def rows_differ_request(rng: np.random.Generator, vocab: int = 8, gamma: int = 3) -> FixedDraftRequest:
    """Draft logits present; every row different; T = 0.8. Slot 1 proposes the token with the largest
    ratio ``b/q`` (> 1: the clip at step 1 matters), slot 2 the likeliest draft token with ratio < 1,
    later slots a token drawn from their draft row."""
    temperature = 0.8
    target = rng.normal(0.0, 1.5, size=(gamma + 1, vocab))
    draft = target[:gamma] + rng.normal(0.0, 1.0, size=(gamma, vocab))
    b, q = _softmax(target / temperature), _softmax(draft / temperature)
    ids = np.array([rng.choice(vocab, p=row) for row in q])
    ratio = b[:gamma] / q
    ids[0] = int(np.argmax(ratio[0]))
    if gamma > 1:
        ids[1] = int(np.argmax(np.where(ratio[1] < 1, q[1], -1.0)))
    return FixedDraftRequest("rows_differ", _f32(target), _f32(draft), ids, temperature, _position(rng))


def block_trap_request(rng: np.random.Generator) -> FixedDraftRequest:
    """g = 2, V = 6 with a small ``p_1 = b_1(x_1)/q_1(x_1)`` and a likely stop at slot 1, so the block
    residual ``(p_1 b_2 - q_2)_+`` differs strongly from the token residual ``(b_2 - q_2)_+``.
    Small random jitter keeps exact ties away; temperature 1 keeps the construction exact."""
    b = np.array(
        [
            [0.10, 0.30, 0.30, 0.10, 0.10, 0.10],
            [0.45, 0.40, 0.06, 0.04, 0.03, 0.02],
            [0.20, 0.20, 0.20, 0.15, 0.15, 0.10],
        ]
    )
    q = np.array([[0.20, 0.10, 0.10, 0.20, 0.20, 0.20], [0.01, 0.30, 0.55, 0.06, 0.04, 0.04]])
    target = np.log(b) + rng.normal(0.0, 0.01, size=b.shape)
    draft = np.log(q) + rng.normal(0.0, 0.01, size=q.shape)
    return FixedDraftRequest("block_trap", _f32(target), _f32(draft), np.array([0, 2]), 1.0, _position(rng))


def point_mass_request(rng: np.random.Generator, vocab: int = 8, gamma: int = 3) -> FixedDraftRequest:
    """No draft logits; T = 1.3; two tokens of every target row are masked to ``-inf``, and the LAST
    draft token is one of them (acceptance there has probability exactly 0)."""
    target = rng.normal(0.0, 1.0, size=(gamma + 1, vocab))
    ids = np.empty(gamma, dtype=np.int64)
    for j in range(gamma + 1):
        masked = rng.choice(vocab, size=2, replace=False)
        target[j, masked] = -np.inf
        if j < gamma:
            allowed = masked if j == gamma - 1 else np.setdiff1d(np.arange(vocab), masked)
            ids[j] = int(rng.choice(allowed))
    return FixedDraftRequest("point_mass_zero_prob_draft", _f32(target), None, ids, 1.3, _position(rng))


def greedy_ties_request(rng: np.random.Generator, vocab: int = 8, gamma: int = 3) -> FixedDraftRequest:
    """T = 0 with exact ties for the maximum in every row; drafts equal the lowest-index argmax for the
    first ``gamma - 1`` slots and the tied HIGHER index at the last slot (must be rejected)."""
    target = np.round(rng.normal(0.0, 1.0, size=(gamma + 1, vocab)), 1)
    ids = np.empty(gamma, dtype=np.int64)
    for j in range(gamma + 1):
        tied = np.sort(rng.choice(vocab, size=2, replace=False))
        target[j, tied] = target[j].max() + 1.0
        if j < gamma:
            ids[j] = tied[1] if j == gamma - 1 else tied[0]
    draft = rng.normal(0.0, 1.0, size=(gamma, vocab))
    return FixedDraftRequest("greedy_ties", _f32(target), _f32(draft), ids, 0.0, _position(rng))


def tiny_temperature_request(
    rng: np.random.Generator, vocab: int = 8, gamma: int = 2, min_temperature: float = 0.0
) -> FixedDraftRequest:
    """T = 1e-6 with well-separated logits: nearly greedy, but sampled (``logits / T`` ~ 1e6). For a
    kernel whose domain starts above 1e-6, the lowest temperature of its domain instead."""
    target = np.stack([rng.permutation(np.linspace(-2.0, 2.0, vocab)) for _ in range(gamma + 1)])
    draft = np.stack([rng.permutation(np.linspace(-2.0, 2.0, vocab)) for _ in range(gamma)])
    ids = np.array([int(np.argmax(target[j])) if j == 0 else int(np.argmax(draft[j])) for j in range(gamma)])
    temperature = max(1e-6, lowest_in_domain(min_temperature)) if min_temperature > 0 else 1e-6
    return FixedDraftRequest("tiny_temperature", _f32(target), _f32(draft), ids, temperature, _position(rng))


def fixed_draft_requests(
    rng: np.random.Generator, dtypes=(torch.float32,), min_temperature: float = 0.0
) -> list[FixedDraftRequest]:
    """The conditional-law suite (same for every profile: the laws are small, only n changes).

    Every request in float32; for each 16-bit dtype in ``dtypes``, copies of the three sampled
    requests whose loads differ by dtype (draft logits with a clip and a block trap, point drafts with
    zero-probability tokens). The greedy and tiny-temperature requests stay float32-only: their
    outcome is (nearly) deterministic, so a 16-bit copy adds little but assertions."""
    base = [
        rows_differ_request(rng),
        block_trap_request(rng),
        point_mass_request(rng),
        greedy_ties_request(rng),
        tiny_temperature_request(rng, min_temperature=min_temperature),
    ]
    copies = [in_logit_dtype(r, d) for d in SIXTEEN_BIT_DTYPES if d in dtypes for r in base[:3]]
    return base + copies


@dataclass
class ModelPair:
    """Context-dependent target and draft models over prefixes of length ``0..gamma``, as logit tables.

    Prefix ``x^i`` has row ``offsets[i] + sum_j x_j V^(i-1-j)``; the target table covers lengths
    ``0..gamma``, the draft table ``0..gamma-1``. ``M(prefix) = softmax(table[row] / T)``.
    """

    label: str
    vocab: int
    gamma: int
    temperature: float
    target_table: np.ndarray  # float32 [sum_{i<=g} V^i, V]
    draft_table: np.ndarray  # float32 [sum_{i<g} V^i, V]

    def offsets(self) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(self.vocab ** np.arange(self.gamma + 1))))

    def row_of(self, prefix: tuple) -> int:
        code = 0
        for x in prefix:
            code = code * self.vocab + int(x)
        return int(self.offsets()[len(prefix)]) + code

    def target_model(self, prefix: tuple) -> np.ndarray:
        return _softmax(self.target_table[self.row_of(prefix)].astype(np.float64) / self.temperature)

    def draft_model(self, prefix: tuple) -> np.ndarray:
        return _softmax(self.draft_table[self.row_of(prefix)].astype(np.float64) / self.temperature)


def model_pair(
    rng: np.random.Generator, label: str, vocab: int, gamma: int, temperature: float, draft_noise: float
) -> ModelPair:
    """Gaussian target logits per prefix; draft = target + Gaussian noise of scale ``draft_noise``."""
    rows = int(np.sum(vocab ** np.arange(gamma + 1)))
    target = rng.normal(0.0, 1.2, size=(rows, vocab))
    draft_rows = rows - vocab**gamma
    draft = target[:draft_rows] + rng.normal(0.0, draft_noise, size=(draft_rows, vocab))
    return ModelPair(label, vocab, gamma, temperature, _f32(target), _f32(draft))


def model_pairs(rng: np.random.Generator, max_draft: int) -> list[ModelPair]:
    """The marginal-law suite: small V, context-dependent models, temperatures != 1."""
    return [
        model_pair(rng, "v4_g3", 4, min(3, max_draft), 0.7, 1.0),
        model_pair(rng, "v3_g4", 3, min(4, max_draft), 1.4, 1.5),
    ]


@dataclass
class LargeVocabRow:
    """A target row (and draft row, or None for a fixed point-mass draft) for the first-token law.

    ``bins [V]`` maps each token to a bin of roughly equal target mass in index order (tokens are
    arranged so that index order is probability order for peaked rows: the last bins hold the tail);
    tokens of probability exactly 0 are ``-1`` (their own cell, a certain failure when observed).
    """

    label: str
    target: np.ndarray  # float32 [2, V]: row 0 judges the draft, row 1 is the bonus row
    draft: np.ndarray | None  # float32 [1, V] or None
    point_mass_id: int
    temperature: float


def equal_mass_bins(probs: np.ndarray, num_bins: int) -> np.ndarray:
    """Bin id per token: consecutive tokens (index order) grouped into ~``num_bins`` bins of equal
    mass; a token heavier than one bin's share gets a bin of its own. Zero-probability tokens: -1."""
    positive = probs > 0
    cum = np.cumsum(np.where(positive, probs, 0.0))
    before = cum - np.where(positive, probs, 0.0)
    bins = np.minimum((before * num_bins / cum[-1]).astype(np.int64), num_bins - 1)
    _, dense = np.unique(bins[positive], return_inverse=True)
    out = np.full(probs.shape, -1, dtype=np.int64)
    out[positive] = dense
    return out


def large_vocab_rows(rng: np.random.Generator, vocab: int) -> list[LargeVocabRow]:
    """Three first-token rows (where fp32 noise quantisation shows: BUGS.md class 15):
    - a Zipf-peaked row with 10% masked tokens, judged with a point-mass draft ON a masked token, so
      every first token comes from the sampler (the residual is the whole row), T = 0.9;
    - the same row with noisy draft logits and drafts sampled from them (accept + residual mixture);
    - a near-uniform flat row with a fixed point-mass draft, T = 1.
    """
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    peaked = -1.1 * np.log(ranks)
    masked = rng.choice(np.arange(1, vocab), size=max(1, vocab // 10), replace=False)
    peaked[masked] = -np.inf
    peaked_target = np.stack([peaked, rng.normal(0.0, 1.0, vocab)])
    peaked_draft = (peaked + rng.normal(0.0, 0.5, vocab))[None, :]
    peaked_draft[~np.isfinite(peaked_draft)] = -5.0  # the draft may propose masked tokens
    flat = rng.normal(0.0, 0.05, size=(2, vocab))
    return [
        LargeVocabRow("zipf_rejected_point_mass", _f32(peaked_target), None, int(masked[0]), 0.9),
        LargeVocabRow("zipf_sampled_drafts", _f32(peaked_target), _f32(peaked_draft), -1, 0.9),
        LargeVocabRow("near_uniform_flat", _f32(flat), None, int(rng.integers(vocab)), 1.0),
    ]
