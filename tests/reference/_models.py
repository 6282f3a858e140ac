"""Model pairs, request rows and batches for the reference tests (seeded, no global RNG)."""

from __future__ import annotations

import itertools

import numpy as np

from reference.laws import conditional_law


class TableModel:
    """A context-dependent model: one probability row per prefix, drawn once from a seeded generator."""

    def __init__(self, gen: np.random.Generator, vocab: int, depth: int, zero_fraction: float = 0.0):
        self.rows = {}
        for length in range(depth + 1):
            for prefix in itertools.product(range(vocab), repeat=length):
                row = gen.dirichlet(np.full(vocab, 0.7))
                if zero_fraction and vocab > 1:
                    row[gen.random(vocab) < zero_fraction] = 0.0
                    if row.sum() == 0:
                        row[gen.integers(vocab)] = 1.0
                    row /= row.sum()
                self.rows[prefix] = row

    def __call__(self, prefix):
        return self.rows[tuple(prefix)]


class ConstantModel:
    """The same row at every prefix (the i.i.d. context-free case)."""

    def __init__(self, row):
        self.row = np.asarray(row)

    def __call__(self, prefix):
        return self.row


def log_rows(rows) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(rows, dtype=np.float64))


def request_logits(target_model, draft_model, draft) -> tuple[np.ndarray, np.ndarray]:
    """Raw logits (log-probabilities, T = 1) of one request: target ``[g+1, V]``, draft ``[g, V]``."""
    draft = tuple(int(x) for x in draft)
    target = [target_model(draft[:i]) for i in range(len(draft) + 1)]
    drafts = [draft_model(draft[:i]) for i in range(len(draft))]
    vocab = len(target[0])
    return log_rows(target), log_rows(drafts).reshape(len(draft), vocab)


def drafts_with_probability(draft_model, gamma: int, vocab: int):
    """Every draft ``x^g`` with positive draft probability, with that probability."""
    for draft in itertools.product(range(vocab), repeat=gamma):
        prob = 1.0
        for i, x in enumerate(draft):
            prob *= draft_model(draft[:i])[x]
        if prob > 0:
            yield draft, prob


def marginal_from_conditional(
    target_model, draft_model, gamma, vocab, method, law_fn=conditional_law
) -> dict:
    """Output law obtained by enumerating drafts and weighting their conditional laws (exact)."""
    out: dict = {}
    for draft, prob in drafts_with_probability(draft_model, gamma, vocab):
        tl, dl = request_logits(target_model, draft_model, draft)
        law = law_fn(tl, dl, draft, 1.0, method)
        for tau, y in zip(*np.nonzero(law), strict=True):
            key = (draft[:tau], int(y))
            out[key] = out.get(key, 0.0) + prob * law[tau, y]
    return out


def max_abs_difference(law_a: dict, law_b: dict) -> float:
    keys = set(law_a) | set(law_b)
    return max(abs(float(law_a.get(k, 0.0)) - float(law_b.get(k, 0.0))) for k in keys)


def concat_requests(requests) -> dict:
    """Batch arrays (DESIGN.md layout) from ``[(target [k+1,V], draft [k,V] | None, ids [k]), ...]``."""
    lengths = [len(ids) for _, _, ids in requests]
    vocab = requests[0][0].shape[1]
    drafts = [d for _, d, _ in requests]
    return dict(
        target_logits=np.concatenate([t for t, _, _ in requests]),
        draft_logits=None
        if any(d is None for d in drafts)
        else np.concatenate([d.reshape(-1, vocab) for d in drafts]),
        draft_token_ids=np.concatenate([np.asarray(ids, dtype=np.int64) for _, _, ids in requests]),
        cu_num_draft_tokens=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
    )
