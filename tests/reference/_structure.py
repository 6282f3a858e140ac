"""Structural checks on a ReferenceResult (ids in range, padding, accepted prefix, support)."""

from __future__ import annotations

import numpy as np


def check_structure(result, batch: dict) -> None:
    """Raise AssertionError if the result breaks the output contract for ``batch`` (verify_batch kwargs)."""
    cu = np.asarray(batch["cu_num_draft_tokens"])
    ids = np.asarray(batch["draft_token_ids"])
    vocab = np.asarray(batch["target_logits"]).shape[1]
    lengths = np.diff(cu)
    out, emitted = result.output_token_ids, result.num_emitted
    assert out.shape == (lengths.size, (lengths.max() if lengths.size else 0) + 1)
    assert np.all((emitted >= 1) & (emitted <= lengths + 1)), "num_emitted out of [1, k+1]"
    for r in range(lengths.size):
        n = emitted[r]
        assert np.all((out[r, :n] >= 0) & (out[r, :n] < vocab)), f"request {r}: id out of [0, V)"
        assert np.all(out[r, n:] == -1), f"request {r}: padding is not -1"
        np.testing.assert_array_equal(
            out[r, : n - 1], ids[cu[r] : cu[r] + n - 1], err_msg=f"request {r}: prefix"
        )


def check_support(result, batch: dict) -> None:
    """Sampled requests never accept or emit a token of target probability 0 (finite rows only)."""
    cu = np.asarray(batch["cu_num_draft_tokens"])
    target = np.asarray(batch["target_logits"], dtype=np.float64)
    temps = np.asarray(batch["temperature"], dtype=np.float64)
    for r in range(cu.size - 1):
        if temps[r] == 0:
            continue
        for j in range(result.num_emitted[r]):
            row = target[cu[r] + r + j]
            if np.isnan(row).any() or np.all(np.isneginf(row)):
                continue
            # Exact zeros come from -inf logits only: a finite logit whose probability underflows
            # float64 (tiny temperatures) still has positive probability and may be accepted.
            logit = row[result.output_token_ids[r, j]]
            assert logit > -np.inf, f"request {r} slot {j}: emitted a token of target probability 0"
