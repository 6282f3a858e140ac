"""A small mixed batch for the adapter mapping tests of the outside engines (FlashInfer, SGLang)."""

from __future__ import annotations

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
