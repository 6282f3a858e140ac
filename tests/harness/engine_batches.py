"""What the adapter tests of the outside engines (FlashInfer, SGLang) share: a small mixed batch and
the install guard's three answers."""

from __future__ import annotations

import re

import pytest
import torch

from harness.contract import VerifyBatch


def small_batch(
    vocab: int, data_seed: int, temps=(0.7, 0.0, 1.3), ids=(3, 5, 1, 2, 4), lens=(2, 0, 3), draft_logits=True
) -> VerifyBatch:
    """Three requests (a sampled one, a greedy one without drafts, a sampled one with three drafts by
    default), seeds of both signs and a position at 2^32 - 1."""
    gen = torch.Generator().manual_seed(data_seed)
    cu = [0]
    for k in lens:
        cu.append(cu[-1] + k)
    return VerifyBatch(
        target_logits=torch.randn(sum(lens) + len(lens), vocab, generator=gen),
        draft_logits=torch.randn(sum(lens), vocab, generator=gen) if draft_logits else None,
        draft_token_ids=torch.tensor(ids, dtype=torch.int64),
        cu_num_draft_tokens=torch.tensor(cu, dtype=torch.int32),
        temperature=torch.tensor(temps, dtype=torch.float32),
        seeds=torch.tensor([11, -12, 2**40], dtype=torch.int64),
        positions=torch.tensor([5, 9, 2**32 - 1], dtype=torch.int64),
    )


def assert_install_guard(monkeypatch, adapter, cached, error, install: str, old: str, supported: str,
                         available, batch: VerifyBatch) -> None:
    """Not installed: ``error`` naming the ``install`` command; an ``old`` version: ``error`` naming the
    ``supported`` one; the supported version without CUDA: ``available()`` says CUDA is missing."""
    cached.cache_clear()
    try:
        monkeypatch.setattr(adapter, "installed_version", lambda: None)
        with pytest.raises(error, match=install):
            adapter.chain.verify(batch)
        monkeypatch.setattr(adapter, "installed_version", lambda: old)
        names = rf"{re.escape(old)} is installed.*knows {re.escape(supported)}"
        with pytest.raises(error, match=names):
            adapter.chain.verify(batch)
        monkeypatch.setattr(adapter, "installed_version", lambda: supported)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        assert "CUDA" in available()
    finally:
        cached.cache_clear()
