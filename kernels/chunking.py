"""Chunk planning and the per-chunk workspace (every intermediate our kernels allocate).

Nothing here is proportional to ``rows x V``: pass 1 keeps a few float32 statistics per (row, vocab
block), so a logit row costs :func:`workspace_bytes_per_logit_row` bytes (about 44 bytes per vocab
block). ``max_chunk_bytes`` is turned into a row budget with that figure and requests are packed with
the same greedy rule as ``reference.chunking.plan_chunks`` (whole requests, a request larger than the
budget runs alone). Randomness and every decision are per request, so the plan never changes a result.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np
import torch

from kernels.launch import current_raw_stream, device_index

# float32/int32 words the workspace holds, per unit (see Workspace.allocate).
# blk_max, blk_tail, blk_arg, for every target and draft row (blk_arg is allocated but unwritten since
# v24, when the greedy argmax moved from pass 1 to decide; the kernels still take its pointer)
_WORDS_PER_ROW_BLOCK = 3
_WORDS_PER_ROW = 5  # row_max, row_log_sum, row_arg, row_scale, row_req
_WORDS_PER_DRAFT_BLOCK = 1  # z_part
_WORDS_PER_DRAFT = 1  # logp_before
_WORDS_PER_REQ_BLOCK = 2  # res_score, res_index (per block of the sampling race)
# Counters of the small-batch launch (kernels/fused_decide.py) after ``done``, zeroed with it by the
# row table: the ticket (programs in start order), finished pass-1 programs, finished pass-2 programs.
SYNC_WORDS = 3
# tau, residual_logp, done (race blocks finished, a spare word, then the race's best score so far:
# ``done`` holds 3 words per request; the spare word, once the removed pipelined launch's counter, is
# kept so that chunk plans for a byte budget stay as they were), and SYNC_WORDS charged to every
# request (an upper bound: a chunk holds them once)
_WORDS_PER_REQ = 5 + SYNC_WORDS


def workspace_words(num_target_rows: int, num_drafts: int, num_reqs: int, num_vblocks: int,
                    race_blocks: int) -> int:
    rows = num_target_rows + num_drafts
    return (rows * (_WORDS_PER_ROW_BLOCK * num_vblocks + _WORDS_PER_ROW)
            + num_drafts * (_WORDS_PER_DRAFT_BLOCK * num_vblocks + _WORDS_PER_DRAFT)
            + num_reqs * (_WORDS_PER_REQ_BLOCK * race_blocks + _WORDS_PER_REQ))


def workspace_bytes_per_logit_row(num_vblocks: int, race_blocks: int) -> int:
    """An upper bound of workspace bytes per target row: a request with k drafts has k+1 target
    rows, k draft rows and one request entry, all charged to its k+1 target rows."""
    return 4 * workspace_words(1, 1, 1, num_vblocks, race_blocks)


def plan_chunks(cu_num_logits: Sequence[int], max_chunk_logits: int | None) -> list[tuple[int, int]]:
    """``(start_req, end_req)`` ranges of whole requests holding at most ``max_chunk_logits`` rows each
    (a single larger request runs alone); ``None`` means one chunk. Same rule as
    ``reference.chunking.plan_chunks``: extend the chunk while the next request still fits. One binary
    search per chunk, so the host cost does not grow with the number of requests."""
    cu = np.asarray(cu_num_logits, dtype=np.int64)
    num_reqs = cu.size - 1
    if num_reqs <= 0:
        return []
    if max_chunk_logits is None or cu[-1] - cu[0] <= max_chunk_logits:
        return [(0, num_reqs)]
    chunks, start = [], 0
    while start < num_reqs:
        # largest end with cu[end] - cu[start] <= budget; at least one request
        end = int(np.searchsorted(cu, cu[start] + max_chunk_logits, side="right")) - 1
        end = min(max(end, start + 1), num_reqs)
        chunks.append((start, end))
        start = end
    return chunks


def plan_for_budget(draft_lengths, num_vblocks: int, race_blocks: int,
                    max_chunk_bytes: int | None) -> list[tuple[int, int]]:
    cu_num_logits = np.concatenate(([0], np.cumsum(np.asarray(draft_lengths, dtype=np.int64) + 1)))
    if max_chunk_bytes is None:
        return plan_chunks(cu_num_logits, None)
    rows = max(1, max_chunk_bytes // workspace_bytes_per_logit_row(num_vblocks, race_blocks))
    return plan_chunks(cu_num_logits, rows)


@dataclass
class Workspace:
    """Views into one float32 and one int32 allocation, sized for the largest chunk."""

    num_vblocks: int
    blk_max: torch.Tensor
    blk_tail: torch.Tensor
    blk_arg: torch.Tensor
    row_max: torch.Tensor
    row_log_sum: torch.Tensor
    row_arg: torch.Tensor
    row_scale: torch.Tensor
    row_req: torch.Tensor
    z_part: torch.Tensor
    logp_before: torch.Tensor
    res_score: torch.Tensor
    res_index: torch.Tensor
    tau: torch.Tensor
    residual_logp: torch.Tensor
    done: torch.Tensor
    sync: torch.Tensor
    nbytes: int
    buffers: tuple = ()

    def record_stream(self, stream) -> None:
        """Keep the allocations alive until ``stream`` has finished with them."""
        for buffer in self.buffers:
            buffer.record_stream(stream)

    @classmethod
    def allocate(cls, num_target_rows, num_drafts, num_reqs, num_vblocks, race_blocks, device) -> Workspace:
        rows, nvb = num_target_rows + num_drafts, num_vblocks
        f_sizes = [rows * nvb, rows * nvb, rows, rows, num_drafts * nvb, num_drafts, num_reqs * race_blocks,
                   num_reqs, rows]
        i_sizes = [rows * nvb, rows, num_reqs * race_blocks, num_reqs, rows, 3 * num_reqs, SYNC_WORDS]
        f_buf = torch.empty(sum(f_sizes), dtype=torch.float32, device=device)
        i_buf = torch.empty(sum(i_sizes), dtype=torch.int32, device=device)
        f = f_buf.split(f_sizes)
        i = i_buf.split(i_sizes)
        return cls(num_vblocks=nvb, blk_max=f[0], blk_tail=f[1], row_max=f[2], row_log_sum=f[3],
                   z_part=f[4], logp_before=f[5], res_score=f[6], residual_logp=f[7], row_scale=f[8],
                   blk_arg=i[0], row_arg=i[1], res_index=i[2], tau=i[3], row_req=i[4], done=i[5], sync=i[6],
                   nbytes=4 * (f_buf.numel() + i_buf.numel()), buffers=(f_buf, i_buf))


_reuse = threading.local()


def reusable_workspace(sizes: tuple[int, int, int, int, int], device: torch.device) -> Workspace:
    """``Workspace.allocate(*sizes, device)``, kept for the next call on the same thread, device and
    stream with the same sizes (most serving steps repeat their batch layout).

    Reuse is safe because one stream runs the calls in order: the next call's first kernel starts
    after the previous call's last. Threads never share an entry. Only the latest layout is kept (one
    workspace per thread, device and stream: at most one chunk's budget). Inside a CUDA graph capture
    a fresh workspace is allocated from the graph's pool instead. ``release_workspaces()`` frees them.
    """
    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return Workspace.allocate(*sizes, device)
        where = (device, current_raw_stream(device_index(device)))
    else:
        where = (device, None)
    kept = getattr(_reuse, "entries", None)
    if kept is None:
        kept = _reuse.entries = {}
    entry = kept.get(where)
    if entry is not None and entry[0] == sizes:
        return entry[1]
    kept.pop(where, None)  # free the old layout before allocating the new one
    ws = Workspace.allocate(*sizes, device)
    kept[where] = (sizes, ws)
    return ws


def kept_plans() -> dict:
    """This thread's call plans (kernels/call_plan.py): they hold workspaces, so they live here."""
    plans = getattr(_reuse, "plans", None)
    if plans is None:
        plans = _reuse.plans = {}
    return plans


def release_workspaces() -> None:
    """Drop the workspaces this thread keeps for reuse (and the call plans that hold some)."""
    _reuse.entries = {}
    _reuse.plans = {}
