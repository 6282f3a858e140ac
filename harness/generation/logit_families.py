"""Logit families: bulk target/draft logits and draft tokens, generated from one seed with NumPy.

Every family is a pure function of ``(family, scale, vocab_size, draft_lens, temperatures,
has_draft_logits, data_seed)``, so a case description (harness/generation/cases.py) rebuilds the same arrays
on
any machine. Each family targets a class of bug (BUGS.md): ``ties`` (greedy tie-break, #12),
``one_hot``/``equal`` (p == q, #20), ``disjoint`` and ``target_zero`` (zero-probability drafts, #8),
``masked`` (``-inf`` masks, #9), ``huge`` (magnitudes to 1e4, #13/#14), ``all_negative`` (padded vocab
tail winning a max, #10), ``near_uniform`` (huge flat rows, #15), ``gaussian``/``zipf`` (typical rows,
rows that differ per position, #2/#4).

Draft row ``d`` of request ``r`` is the draft distribution for the same position as target row
``d + r``; families correlate the two so that acceptance is neither always nor never.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FAMILIES = (
    "gaussian",
    "zipf",
    "near_uniform",
    "one_hot",
    "equal",
    "disjoint",
    "masked",
    "target_zero",
    "huge",
    "ties",
    "all_negative",
)
NEG_INF = -np.inf


@dataclass
class LogitArrays:
    target: np.ndarray  # [num_logits, V] float64
    draft: np.ndarray | None  # [num_draft_total, V] float64
    draft_token_ids: np.ndarray  # [num_draft_total] int64


def _row_layout(draft_lens: list[int]) -> np.ndarray:
    """For each draft row, the index of the target row at the same position."""
    rows = []
    base = 0
    for k in draft_lens:
        rows.extend(range(base, base + k))
        base += k + 1
    return np.asarray(rows, dtype=np.int64)


def _gumbel_pick(rng: np.random.Generator, logits: np.ndarray) -> np.ndarray:
    """One sample per row from softmax(logits) (rows with no finite entry pick index 0)."""
    noise = -np.log(-np.log(rng.uniform(1e-12, 1.0, size=logits.shape)))
    scores = np.where(np.isfinite(logits), logits + noise, -np.inf)
    return np.argmax(scores, axis=1).astype(np.int64)


def _base_rows(rng: np.random.Generator, family: str, scale: float, n: int, vocab: int) -> np.ndarray:
    if family == "zipf":
        ranks = rng.permuted(np.tile(np.arange(vocab), (n, 1)), axis=1)
        return -scale * np.log1p(ranks.astype(np.float64))
    if family == "near_uniform":
        return rng.normal(0.0, 1e-3, size=(n, vocab))
    if family == "huge":
        return rng.uniform(-1e4, 1e4, size=(n, vocab)) * min(scale, 1.0)
    if family == "ties":
        return rng.integers(0, 3, size=(n, vocab)).astype(np.float64)
    if family == "all_negative":
        return rng.normal(-1e3, scale, size=(n, vocab))
    return rng.normal(0.0, scale, size=(n, vocab))


def _keep_one_finite(rng: np.random.Generator, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Apply a ``-inf`` mask but never mask a whole row (that is the degenerate-row family)."""
    empty = mask.all(axis=1)
    if empty.any():
        mask[empty, rng.integers(0, rows.shape[1], size=int(empty.sum()))] = False
    return np.where(mask, NEG_INF, rows)


def generate(
    family: str,
    scale: float,
    vocab_size: int,
    draft_lens: list[int],
    temperatures: list[float],
    has_draft_logits: bool,
    data_seed: int,
) -> LogitArrays:
    """Build the logits and draft tokens of one case (float64; the caller casts to the case dtype)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown logit family {family!r}; known: {FAMILIES}")
    rng = np.random.default_rng(data_seed)
    num_draft = int(sum(draft_lens))
    num_logits = num_draft + len(draft_lens)
    vocab = vocab_size
    same_pos = _row_layout(draft_lens)
    base = "gaussian" if family in ("one_hot", "equal", "disjoint", "masked", "target_zero") else family
    target = _base_rows(rng, base, scale, num_logits, vocab)
    draft = target[same_pos] + _base_rows(rng, base, scale, num_draft, vocab) * 0.5

    if family == "one_hot":
        hot_t = rng.integers(0, vocab, size=num_logits)
        target = np.full((num_logits, vocab), NEG_INF)
        target[np.arange(num_logits), hot_t] = 0.0
        same = rng.random(num_draft) < 0.5
        hot_d = np.where(same, hot_t[same_pos], rng.integers(0, vocab, size=num_draft))
        draft = np.full((num_draft, vocab), NEG_INF)
        draft[np.arange(num_draft), hot_d] = 0.0
    elif family == "equal":
        draft = target[same_pos].copy()
    elif family == "disjoint" and vocab >= 2:
        in_target = rng.random((num_logits, vocab)) < 0.5
        in_target[:, 0], in_target[:, 1] = True, False
        target = np.where(in_target, target, NEG_INF)
        draft = np.where(in_target[same_pos], NEG_INF, draft)
    elif family == "masked":
        target = _keep_one_finite(rng, target, rng.random(target.shape) < 0.5)
        draft = _keep_one_finite(rng, draft, rng.random(draft.shape) < 0.5)

    # Draft tokens: sampled from the draft row when there is one; otherwise a mix of the target's
    # likely tokens and uniform ids, so point-mass drafts are sometimes accepted and sometimes not.
    temps = np.repeat(np.asarray(temperatures, dtype=np.float64), draft_lens) if num_draft else np.zeros(0)
    eff_t = np.where(temps > 0, np.maximum(temps, 1e-3), 1.0)[:, None] if num_draft else np.ones((0, 1))
    if has_draft_logits:
        ids = _gumbel_pick(rng, draft / eff_t) if num_draft else np.zeros(0, dtype=np.int64)
    else:
        likely = _gumbel_pick(rng, target[same_pos] / eff_t) if num_draft else np.zeros(0, np.int64)
        ids = np.where(rng.random(num_draft) < 0.6, likely, rng.integers(0, vocab, size=num_draft))
    if family == "target_zero" and num_draft and vocab > 1:
        # The target gives the draft token probability 0 on about half of the draft rows.
        zero = rng.random(num_draft) < 0.5
        rows = same_pos[zero]
        target[rows, ids[zero]] = NEG_INF
        empty = np.isneginf(target[rows]).all(axis=1)
        target[rows[empty], (ids[zero][empty] + 1) % vocab] = 0.0
    return LogitArrays(target, draft if has_draft_logits else None, ids.astype(np.int64))
