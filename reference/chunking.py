"""Splitting a batch into chunks of whole requests under a budget of logits rows (vLLM-style).

``plan_chunks`` packs requests greedily from the front: a chunk takes the next request, then keeps
adding requests while its total row count stays within the budget. A request larger than the budget
runs alone. Example (NOTES.md): ``cu = [0, 3, 4, 11, 13]``, budget 5 -> ``[(0, 2), (2, 3), (3, 4)]``.
"""

from __future__ import annotations

import numpy as np


def plan_chunks(cu_num_logits, max_chunk_logits: int | None) -> list[tuple[int, int]]:
    """Contiguous, covering ``(start_req, end_req)`` ranges (end exclusive) of whole requests.

    ``cu_num_logits`` ``[num_reqs + 1]``: cumulative logits rows per request, starting at 0,
    non-decreasing. Every chunk holds at most ``max_chunk_logits`` rows unless it is a single request
    that alone exceeds the budget. ``max_chunk_logits=None`` means unlimited (one chunk). An empty
    batch (``num_reqs == 0``) gives ``[]``. Raises ValueError for a budget ``<= 0`` or a malformed ``cu``.
    """
    cu = np.asarray(cu_num_logits, dtype=np.int64).reshape(-1)
    if cu.size == 0 or cu[0] != 0 or np.any(np.diff(cu) < 0):
        raise ValueError("cu_num_logits must start at 0 and be non-decreasing")
    if max_chunk_logits is not None and max_chunk_logits <= 0:
        raise ValueError(f"max_chunk_logits must be positive, got {max_chunk_logits}")
    num_reqs = cu.size - 1
    if num_reqs == 0:
        return []
    if max_chunk_logits is None:
        return [(0, num_reqs)]
    chunks = []
    start = 0
    while start < num_reqs:
        # The furthest end whose rows fit, but always at least one request.
        end = int(np.searchsorted(cu, cu[start] + max_chunk_logits, side="right")) - 1
        end = max(end, start + 1)
        chunks.append((start, end))
        start = end
    return chunks
