"""Catalogues of bad input: malformed batches (must be refused) and degenerate rows (documented outcome).

``MALFORMATIONS`` break the contract (harness/wellformed.py says how); a kernel claiming
``raises_on_bad_input`` must refuse each with ``ValueError`` or ``TypeError``. ``DEGENERATIONS`` keep
the contract but put NaN, ``+inf`` or all ``-inf`` into rows: docs/interfaces.md section 3 documents
the outcome (ids stay in ``[0, V)``, ``num_emitted`` in range, nothing written out of bounds), and a
validating kernel may refuse them instead.

Each entry maps a well-formed batch to a transformed one; ``as_case`` stores the result verbatim
in a ``Case`` (explicit tensors) so reports and the regression corpus replay exactly that input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from harness.contract import VerifyBatch
from harness.generation.cases import Case, build_batch, case_from_batch

Transform = Callable[[VerifyBatch, np.random.Generator], VerifyBatch]


def _with_draft_id(value_of: Callable[[int], int]) -> Transform:
    def apply(b: VerifyBatch, rng: np.random.Generator) -> VerifyBatch:
        ids = b.draft_token_ids.clone()
        ids[int(rng.integers(0, ids.numel()))] = value_of(b.vocab_size)
        return replace(b, draft_token_ids=ids)

    return apply


def _padded_with_minus_one(b: VerifyBatch, rng: np.random.Generator) -> VerifyBatch:
    """Drafts padded to a rectangle with -1 (BUGS.md #11): more ids than ``cu`` accounts for."""
    pad = torch.full((int(rng.integers(1, 4)),), -1, dtype=torch.int64, device=b.device)
    return replace(b, draft_token_ids=torch.cat([b.draft_token_ids, pad]))


def _cu_edit(edit: Callable[[list[int]], list[int]]) -> Transform:
    def apply(b: VerifyBatch, rng: np.random.Generator) -> VerifyBatch:
        cu = edit(b.cu_num_draft_tokens.tolist())
        return replace(b, cu_num_draft_tokens=torch.tensor(cu, dtype=torch.int32, device=b.device))

    return apply


def _swap_last_two(cu: list[int]) -> list[int]:
    cu = list(cu)
    cu[-2], cu[-1] = cu[-1] + 1, cu[-1]
    return cu


def _scalar_edit(name: str, make: Callable[[torch.Tensor], torch.Tensor]) -> Transform:
    return lambda b, rng: replace(b, **{name: make(getattr(b, name))})


MALFORMATIONS: dict[str, Transform] = {
    "draft_id_minus_one": _with_draft_id(lambda v: -1),
    "draft_id_equals_vocab": _with_draft_id(lambda v: v),
    "draft_id_huge": _with_draft_id(lambda v: 2**40),
    "drafts_padded_with_minus_one": _padded_with_minus_one,
    "cu_not_starting_at_zero": _cu_edit(lambda cu: [1] + cu[1:]),
    "cu_decreasing": _cu_edit(_swap_last_two),
    "target_row_missing": _scalar_edit("target_logits", lambda t: t[:-1]),
    "draft_logits_wrong_vocab": lambda b, rng: replace(
        b,
        draft_logits=torch.zeros(
            b.num_draft_total, b.vocab_size + 1, dtype=b.target_logits.dtype, device=b.device
        ),
    ),
    "draft_logits_other_dtype": lambda b, rng: replace(
        b,
        draft_logits=torch.zeros(
            b.num_draft_total,
            b.vocab_size,
            device=b.device,
            dtype=torch.float16 if b.target_logits.dtype != torch.float16 else torch.float32,
        ),
    ),
    "target_logits_float64": _scalar_edit("target_logits", lambda t: t.double()),
    "temperature_negative": _scalar_edit(
        "temperature",
        lambda t: torch.where(torch.arange(t.numel(), device=t.device) == 0, torch.full_like(t, -1.0), t),
    ),
    "temperature_nan": _scalar_edit("temperature", lambda t: torch.full_like(t, float("nan"))),
    "temperature_too_short": _scalar_edit("temperature", lambda t: t[:-1]),
    "seeds_too_long": _scalar_edit("seeds", lambda t: torch.cat([t, t[:1]])),
    "positions_too_short": _scalar_edit("positions", lambda t: t[:-1]),
    "method_unknown": lambda b, rng: replace(b, method="tree"),
    "chunk_budget_zero": lambda b, rng: replace(b, max_chunk_bytes=0),
    "chunk_budget_negative": lambda b, rng: replace(b, max_chunk_bytes=-4096),
}
# Entries that need at least one draft token to make sense.
NEEDS_DRAFTS = {
    "draft_id_minus_one",
    "draft_id_equals_vocab",
    "draft_id_huge",
    "draft_logits_wrong_vocab",
    "draft_logits_other_dtype",
}


def _rows_edit(name: str, fill: Callable[[torch.Tensor, np.random.Generator], None]) -> Transform:
    def apply(b: VerifyBatch, rng: np.random.Generator) -> VerifyBatch:
        t = getattr(b, name)
        if t is None or t.shape[0] == 0:
            return b
        t = t.clone()
        fill(t[int(rng.integers(0, t.shape[0]))], rng)
        return replace(b, **{name: t})

    return apply


def _some(value: float) -> Callable[[torch.Tensor, np.random.Generator], None]:
    def fill(row: torch.Tensor, rng: np.random.Generator) -> None:
        row[torch.from_numpy(rng.random(row.numel()) < 0.5).to(row.device)] = value
        row[int(rng.integers(0, row.numel()))] = value

    return fill


DEGENERATIONS: dict[str, Transform] = {
    "target_row_nan": _rows_edit("target_logits", _some(float("nan"))),
    "target_row_all_nan": _rows_edit("target_logits", lambda row, rng: row.fill_(float("nan"))),
    "target_row_all_neg_inf": _rows_edit("target_logits", lambda row, rng: row.fill_(float("-inf"))),
    "target_row_pos_inf": _rows_edit("target_logits", _some(float("inf"))),
    "draft_row_nan": _rows_edit("draft_logits", _some(float("nan"))),
    "draft_row_all_neg_inf": _rows_edit("draft_logits", lambda row, rng: row.fill_(float("-inf"))),
}
# For kernels claiming ``draft_padding_minus_one``: a -1 draft is legal, never accepted.
MINUS_ONE_PADDING = "draft_id_minus_one"


def as_case(base: Case, name: str, transform: Transform, device: torch.device | str = "cpu") -> Case:
    """``base`` with ``transform`` applied, stored verbatim and labelled ``name``."""
    batch = build_batch(base, device)
    bad = transform(batch, np.random.default_rng(base.data_seed ^ 0xBAD))
    case = case_from_batch(bad)
    case.label = name
    case.data_seed = base.data_seed
    return case
