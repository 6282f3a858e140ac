"""Per-layout call plans: a repeated small call skips the host work that its layout fixes.

A batch of a few requests is bound by host time, not by the GPU (docs/kernels.md), and serving steps
repeat their batch layout. After a call that ran as one small-batch chunk (``fused_decide``), its
plan is kept: the geometry, the workspace, and the bound value-summary, row-table and verification
launches. The next call with the same layout key runs the plan: summary launch, output allocation,
the wait and the value verdict, one launch.

The key holds everything ``validation.check_metadata`` reads (each tensor's exact type, shape, strides,
dtype, device and layout; ``method``, ``max_chunk_bytes`` and ``want_logprobs`` with their types), plus the
logits' 16-byte alignment (the launch specialisation), whether host ``draft_lengths`` were given,
the current device and stream (the workspace is per stream), the tuning knobs' generation and the
``FastLaunch`` settings. So a key hit implies that the metadata checks pass, and they are skipped;
what depends on values is checked on every call exactly as without a plan: the value summary and its
verdict (the only launch before it), or the host ``draft_lengths`` (``check_host_lengths``), and
``validate=True``'s row check. Anything else (a non-tensor argument, launch hooks such as a profiler,
a CUDA graph capture, tensors without strides such as sparse ones) takes the full path. Plans are
kept per thread, at most ``MAX_PLANS``, each holding the workspace of one chunk of at most 4 requests
(64 KB at V = 262144 with 16 drafts per request), beside the one workspace per stream that
``chunking.reusable_workspace`` keeps; plans made under knobs since re-read are dropped when the next
one is kept, and ``release_workspaces()`` drops them all. ``SPECFUZZ_CALL_PLANS=0`` turns them off.
Results equal the full path's bit for bit: the same kernels with the same arguments; the outputs are
views of storages of ``num_reqs * (num_drafts + 1)`` entries, as on the full path when the geometry
does not depend on the checked width (``driver.OneChunkCall``).
"""

from __future__ import annotations

import torch

import kernels._device
from kernels import launch, tuning
from kernels.chunking import kept_plans
from kernels.geometry import geometry
from kernels.fused_decide import SmallBatchLaunch
from kernels.row_stats import bind_row_table
from kernels.validation import BoundSummary, check_host_lengths, check_rows

MAX_PLANS = 16
_TENSOR = torch.Tensor


def _tensor_key(x):
    # the layout too: a one-element sparse COO tensor reports stride (0,), as an expanded dense one does
    return x.shape, x.stride(), x.dtype, x.device, x.layout


def layout_key(target_logits, draft_logits, draft_token_ids, cu, temperature, seeds, positions, method,
               max_chunk_bytes, want_logprobs, host_lengths: bool):
    """The plan key of a call, or None when the call must take the full path."""
    if not tuning.knobs().call_plans or launch._hooks_set():
        return None
    tensors = (target_logits, draft_token_ids, cu, temperature, seeds, positions)
    if any(type(x) is not _TENSOR for x in tensors):
        return None
    if draft_logits is not None and type(draft_logits) is not _TENSOR:
        return None
    if (type(method) is not str or type(want_logprobs) is not bool
            or type(max_chunk_bytes) not in (int, type(None))):
        return None
    device = target_logits.device
    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return None
        current = launch._current_device()
        where = (current, launch.current_raw_stream(current), launch.current_raw_stream(device.index))
    elif kernels._device.INTERPRETING:
        where = None
    else:
        return None  # check_metadata rejects it
    try:
        draft = (None if draft_logits is None
                 else (*_tensor_key(draft_logits), draft_logits.data_ptr() % 16 == 0))
        return (tuning.generation, *_tensor_key(target_logits), target_logits.data_ptr() % 16 == 0, draft,
                *_tensor_key(draft_token_ids), *_tensor_key(cu), *_tensor_key(temperature),
                *_tensor_key(seeds), *_tensor_key(positions), method, max_chunk_bytes, want_logprobs,
                host_lengths, where, launch.ENABLED, launch.CHECK_VARIANTS)
    except (RuntimeError, NotImplementedError):  # no strides or storage (sparse, nested): full path
        return None


def find(key):
    return None if key is None else kept_plans().get(key)


def keep(key, call, host_lengths: bool) -> None:
    """Keep a plan for ``key`` made from ``call`` (a ``driver.OneChunkCall`` that has just run, so its
    kernels are compiled and the bound launches are direct), if the call is a small batch (and,
    checked by values, its summary needs no copy)."""
    if key is None or not call.small:
        return
    if not host_lengths and not BoundSummary.applies(call.device):
        return
    plans = kept_plans()
    for stale in [k for k in plans if k[0] != tuning.generation]:  # made under knobs since re-read
        del plans[stale]
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[key] = CallPlan(call, host_lengths)


class CallPlan:
    """A small one-chunk call's launches with its layout bound (module docstring). The verification
    launch is bound per checked width (its geometry can depend on the width when requests have
    different draft lengths, ``driver.OneChunkCall``; keyed by the width, a repeated call makes no
    geometry lookup); a launch bound before its kernel was compiled is bound again on the next call."""

    def __init__(self, call, host_lengths: bool):
        target, draft, draft_ids, cu, _, _, _ = call.inputs
        self.num_reqs, self.num_drafts = call.num_reqs, draft_ids.numel()
        self.device, self.want_logprobs, self.storage = call.device, call.want_logprobs, call.max_width
        self.ws, self.flags, self.variant = call.ws, call.flags, call.variant
        self.target_layout = (*target.shape, target.stride(0))
        self.draft_stride = None if draft is None else draft.stride(0)
        self.vocab_size = target.shape[1]
        self.summary = None if host_lengths else BoundSummary(cu, draft_ids, self.vocab_size, call.ws)
        self.table = (bind_row_table(call.ws, self.num_reqs, target.shape[0], call.variant) if host_lengths
                      else None)
        self.launchers: dict = {}

    def small_batch(self, width: int) -> SmallBatchLaunch:
        small = self.launchers.get(width)
        if small is None:
            geo = geometry(self.vocab_size, self.num_reqs, width, None, tuning.knobs())
            flags = self.flags
            small = SmallBatchLaunch(self.ws, self.num_reqs, geo, self.target_layout, self.draft_stride,
                                     self.num_drafts, block_method=flags["block_method"],
                                     two_stage=flags["two_stage"], want_logprobs=self.want_logprobs,
                                     variant=self.variant)
            if small.direct or kernels._device.INTERPRETING:
                self.launchers[width] = small
        return small

    def run(self, target, draft, draft_ids, cu, temperature, seeds, positions, draft_lengths, validate):
        """``rejection_sample``'s result for these inputs (whose layout is the plan's key)."""
        num_reqs, device = self.num_reqs, self.device
        if self.summary is not None:
            self.summary.launch(cu, draft_ids, temperature)
        else:
            max_k = int(check_host_lengths(draft_lengths, num_reqs, self.num_drafts).max())
        out_num = torch.empty(num_reqs, dtype=torch.int32, device=device)
        size = num_reqs * self.storage
        ids_store = torch.empty(size, dtype=torch.int64, device=device)
        logprobs_store = torch.empty(size, dtype=torch.float32, device=device) if self.want_logprobs else None
        if self.summary is not None:
            max_k = self.summary.verdict()
        if validate:
            check_rows(target, draft)
        if self.table is not None:
            self.table(cu, temperature)
        width = max_k + 1
        launch_small = self.small_batch(width)
        launch_small(target, draft, draft_ids, cu, temperature, seeds, positions, ids_store, out_num,
                     logprobs_store, width)
        used = num_reqs * width
        out_logprobs = logprobs_store[:used].view(num_reqs, width) if self.want_logprobs else None
        return ids_store[:used].view(num_reqs, width), out_num, out_logprobs
