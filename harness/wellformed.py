"""What makes a ``VerifyBatch`` well formed, stated once for every adapter and for the bad-input checks.

``malformations(batch)`` lists every violation of the contract (DESIGN.md, docs/interfaces.md) in
words; ``check_well_formed(batch)`` raises ``ValueError`` with that list. Degenerate but legal data
(NaN rows, an all ``-inf`` target row) is not a malformation: its outcome is documented in
docs/interfaces.md section 3 and found by ``degenerate_rows``.
"""

from __future__ import annotations

import torch

from harness.contract import LOGIT_DTYPES, METHODS, VerifyBatch


def _is_1d(t: object, dtype: torch.dtype, length: int | None) -> str | None:
    if not isinstance(t, torch.Tensor):
        return f"expected a tensor, got {type(t).__name__}"
    if t.dim() != 1:
        return f"expected 1-D, got shape {tuple(t.shape)}"
    if t.dtype != dtype:
        return f"expected {dtype}, got {t.dtype}"
    if length is not None and t.numel() != length:
        return f"expected length {length}, got {t.numel()}"
    return None


def malformations(batch: VerifyBatch) -> list[str]:
    """Every contract violation of ``batch``, as readable sentences (empty when well formed)."""
    bad: list[str] = []
    tl = batch.target_logits
    if not isinstance(tl, torch.Tensor) or tl.dim() != 2:
        return ["target_logits must be a 2-D tensor [num_logits, V]"]
    if tl.dtype not in LOGIT_DTYPES:
        bad.append(f"target_logits dtype {tl.dtype} is not one of {LOGIT_DTYPES}")
    vocab = tl.shape[1]
    if vocab < 1:
        bad.append("vocabulary size must be >= 1")
    cu = batch.cu_num_draft_tokens
    problem = _is_1d(cu, torch.int32, None)
    if problem or cu.numel() < 1:
        bad.append(f"cu_num_draft_tokens: {problem or 'must have num_reqs + 1 >= 1 entries'}")
        return bad
    cu_list = cu.tolist()
    num_reqs = len(cu_list) - 1
    if cu_list[0] != 0:
        bad.append(f"cu_num_draft_tokens must start at 0, starts at {cu_list[0]}")
    if any(b < a for a, b in zip(cu_list, cu_list[1:], strict=False)):
        bad.append("cu_num_draft_tokens must be non-decreasing")
    ids = batch.draft_token_ids
    problem = _is_1d(ids, torch.int64, None)
    if problem:
        bad.append(f"draft_token_ids: {problem}")
        return bad
    num_draft = ids.numel()
    if cu_list[-1] != num_draft:
        bad.append(f"cu_num_draft_tokens[-1] = {cu_list[-1]} but there are {num_draft} draft tokens")
    if tl.shape[0] != num_draft + num_reqs:
        bad.append(
            f"target_logits has {tl.shape[0]} rows, expected num_draft_total + num_reqs = "
            f"{num_draft + num_reqs}"
        )
    if num_draft and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        bad.append(
            f"draft_token_ids must lie in [0, {vocab}), got range [{int(ids.min())}, {int(ids.max())}]"
        )
    dl = batch.draft_logits
    if dl is not None:
        if not isinstance(dl, torch.Tensor) or dl.dim() != 2 or tuple(dl.shape) != (num_draft, vocab):
            shape = tuple(dl.shape) if isinstance(dl, torch.Tensor) else type(dl).__name__
            bad.append(f"draft_logits must be [{num_draft}, {vocab}], got {shape}")
        elif dl.dtype != tl.dtype:
            bad.append(f"draft_logits dtype {dl.dtype} differs from target_logits dtype {tl.dtype}")
    for name, dtype in (("temperature", torch.float32), ("seeds", torch.int64), ("positions", torch.int64)):
        problem = _is_1d(getattr(batch, name), dtype, num_reqs)
        if problem:
            bad.append(f"{name}: {problem}")
    if _is_1d(batch.temperature, torch.float32, num_reqs) is None and num_reqs:
        temp = batch.temperature
        if not bool(torch.isfinite(temp).all()) or bool((temp < 0).any()):
            bad.append("temperature must be finite and >= 0 (0 = greedy)")
    if batch.method not in METHODS:
        bad.append(f"method must be one of {METHODS}, got {batch.method!r}")
    mcb = batch.max_chunk_bytes
    if mcb is not None and (isinstance(mcb, bool) or not isinstance(mcb, int) or mcb < 1):
        bad.append(f"max_chunk_bytes must be None or an int >= 1, got {mcb!r}")
    devices = {
        t.device
        for t in (tl, dl, ids, cu, batch.temperature, batch.seeds, batch.positions)
        if isinstance(t, torch.Tensor)
    }
    if len(devices) > 1:
        bad.append(f"all tensors must live on one device, found {sorted(map(str, devices))}")
    return bad


def check_well_formed(batch: VerifyBatch) -> None:
    """Raise ``ValueError`` naming every contract violation of ``batch``."""
    bad = malformations(batch)
    if bad:
        raise ValueError("malformed VerifyBatch: " + "; ".join(bad))


def degenerate_rows(batch: VerifyBatch) -> list[str]:
    """Rows with a documented-outcome degeneracy: NaN anywhere, or a target row that is all ``-inf``."""
    found = []
    tl = batch.target_logits.float()
    for r in torch.nonzero(torch.isnan(tl).any(dim=1)).flatten().tolist():
        found.append(f"target row {r} contains NaN")
    for r in torch.nonzero(torch.isneginf(tl).all(dim=1)).flatten().tolist():
        found.append(f"target row {r} is all -inf")
    if batch.draft_logits is not None:
        dl = batch.draft_logits.float()
        for r in torch.nonzero(torch.isnan(dl).any(dim=1)).flatten().tolist():
            found.append(f"draft row {r} contains NaN")
        for r in torch.nonzero(torch.isneginf(dl).all(dim=1)).flatten().tolist():
            found.append(f"draft row {r} is all -inf")
    return found
