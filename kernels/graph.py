"""``capture_verify``: one verification captured in a CUDA graph, replayed with new values.

Serving engines keep persistent input buffers and replay CUDA graphs for fixed batch layouts. For
such a layout (shapes, host draft lengths, method, budget) the launch sequence of
``rejection_sample`` is fixed and host-synchronisation-free, so it can be captured once and replayed
for a few microseconds of host time instead of one Python launch per kernel.

Contract: the caller writes new VALUES into the same input tensors (logits, draft ids, temperatures,
seeds, positions) and calls :meth:`CapturedVerify.replay`, which returns the same output tensors,
overwritten. The layout (``cu_num_draft_tokens`` equal to the prefix sums of ``draft_lengths``) is
vouched for by the caller on every replay, as with ``rejection_sample(..., draft_lengths=...)``; the
values are checked once, at capture. Results equal ``rejection_sample`` on the same inputs bit for
bit (same kernels, same launch parameters).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from kernels.driver import rejection_sample, verify_into
from kernels.validation import check_metadata, check_values


class CapturedVerify:
    """A captured ``rejection_sample``; build it with :func:`capture_verify`."""

    def __init__(self, graph, outputs):
        self._graph = graph
        self.outputs = outputs

    def replay(self):
        """Run the captured verification on the current input values; returns
        ``(output_token_ids, num_emitted, logprobs_or_None)`` (the same tensors every time)."""
        self._graph.replay()
        return self.outputs


def capture_verify(target_logits, draft_logits, draft_token_ids, cu_num_draft_tokens, temperature, seeds,
                   positions, *, draft_lengths: Sequence[int], method: str = "token",
                   max_chunk_bytes: int | None = 1 << 30, want_logprobs: bool = False) -> CapturedVerify:
    """Capture ``rejection_sample`` for this batch layout (CUDA only). ``draft_lengths`` is required:
    the plan must be fixed on the host."""
    if draft_lengths is None:
        raise ValueError("draft_lengths: required (the captured plan is fixed on the host)")
    if target_logits.device.type != "cuda":
        raise ValueError("target_logits: capture_verify needs CUDA tensors (CUDA graphs)")
    lengths = check_metadata(target_logits, draft_logits, draft_token_ids, cu_num_draft_tokens, temperature,
                             seeds, positions, method, max_chunk_bytes, want_logprobs, draft_lengths)
    checked = check_values(draft_token_ids, cu_num_draft_tokens, temperature, target_logits.shape[1])
    if not np.array_equal(checked.lengths, lengths):
        raise ValueError("draft_lengths: differ from cu_num_draft_tokens")
    args = (target_logits, draft_logits, draft_token_ids, cu_num_draft_tokens, temperature, seeds, positions)
    side = torch.cuda.Stream(device=target_logits.device)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile every kernel variant outside the capture
        outputs = rejection_sample(*args, method=method, max_chunk_bytes=max_chunk_bytes,
                                   want_logprobs=want_logprobs, draft_lengths=lengths)
    torch.cuda.current_stream().wait_stream(side)
    out_ids, out_num, out_logprobs = outputs
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        verify_into(out_ids, out_num, out_logprobs, *args, lengths, method=method,
                    max_chunk_bytes=max_chunk_bytes)
    return CapturedVerify(graph, outputs)
