"""Per-layout call plans: a repeated one-chunk call skips the host work that its layout fixes.

Serving steps repeat their batch layout, and a call's host time (checks, geometry, workspace,
binding, five to seven launches through Python) is what bounds small and medium batches
(docs/kernels-log.md). After a call that ran as one chunk, its plan is kept; the next call with the same
layout key runs it. Two kinds:

- ``CallPlan``, a small-batch chunk (``fused_decide``, at most 4 requests): the geometry, the
  workspace, and the bound value-summary, row-table and verification launches. A run is the summary
  launch, output allocation, the wait and the value verdict, one launch.
- ``ReplayPlan``, any other one-chunk call whose workspace is at most ``REPLAY_MAX_WORKSPACE``: the
  workspace, the bound value summary, and per checked width a record of the chunk's launches
  (``launch.recording``), each bound to Triton's compiled kernel, with the slots where the call's
  own tensors go. A run is the value checks as above, output allocation, and the recorded launches
  with this call's tensors. The first run at a width launches the chunk as the full path does and
  records it. Every tensor a recorded launch receives must be one of the call's inputs or outputs
  (by identity, none two of them the same object) or the workspace's; otherwise that width is not
  recorded and the run launches as the full path does.

The key holds everything ``validation.check_metadata`` reads (each tensor's exact type, shape, strides,
dtype, device and layout; ``method``, ``max_chunk_bytes`` and ``want_logprobs`` with their types), plus the
logits' 16-byte alignment (the launch specialisation), whether host ``draft_lengths`` were given,
the current device and stream (the workspace is per stream) and the ``FastLaunch`` settings. So a
key hit implies that the metadata checks pass, and they are skipped; what depends on values is
checked on every call exactly as without a plan: the value summary and its verdict (the only launch
before it), or the host ``draft_lengths`` (``check_host_lengths``), and ``validate=True``'s row
check. Anything else (a non-tensor argument, launch hooks such as a profiler,
a CUDA graph capture, tensors without strides such as sparse ones) takes the full path. Plans are
kept per thread, at most ``MAX_PLANS`` (each holds its workspace: 64 KB for a small batch at
V = 262144 with 16 drafts per request, 4.1 MiB for 512 x 8 x 262144), beside the one workspace per
stream that ``chunking.reusable_workspace`` keeps; ``release_workspaces()`` drops them all (a test
that changes a ``kernels.tuning`` value must call it). Tests set ``ENABLED`` to compare plans with
the full path. Results equal the full path's bit for bit: the same kernels with the same arguments;
a small batch's outputs are views of storages of ``num_reqs * (num_drafts + 1)`` entries, as on the
full path when the geometry does not depend on the checked width (``driver.OneChunkCall``).
"""

from __future__ import annotations

import torch

import kernels._device
from kernels import launch
from kernels.chunking import kept_plans
from kernels.fused_decide import SmallBatchLaunch
from kernels.row_stats import bind_row_table
from kernels.tuning import geometry
from kernels.validation import BoundSummary, check_host_lengths, check_rows

ENABLED = True
MAX_PLANS = 16
REPLAY_MAX_WORKSPACE = 16 << 20  # bytes: larger one-chunk calls are GPU-bound anyway
REPLAY_MAX_WIDTHS = 8  # recorded widths per replay plan
_TENSOR = torch.Tensor


def _tensor_key(x):
    # the layout too: a one-element sparse COO tensor reports stride (0,), as an expanded dense one does
    return x.shape, x.stride(), x.dtype, x.device, x.layout


def layout_key(target_logits, draft_logits, draft_token_ids, cu, temperature, seeds, positions, method,
               max_chunk_bytes, want_logprobs, host_lengths: bool):
    """The plan key of a call, or None when the call must take the full path."""
    if not ENABLED or launch._hooks_set():
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
        return (*_tensor_key(target_logits), target_logits.data_ptr() % 16 == 0, draft,
                *_tensor_key(draft_token_ids), *_tensor_key(cu), *_tensor_key(temperature),
                *_tensor_key(seeds), *_tensor_key(positions), method, max_chunk_bytes, want_logprobs,
                host_lengths, where, launch.ENABLED, launch.CHECK_VARIANTS)
    except (RuntimeError, NotImplementedError):  # no strides or storage (sparse, nested): full path
        return None


def find(key):
    return None if key is None else kept_plans().get(key)


def keep(key, call, host_lengths: bool, launch_whole) -> None:
    """Keep a plan for ``key`` made from ``call`` (a ``driver.OneChunkCall`` that has just run, so its
    kernels are compiled and the bound launches are direct), unless, checked by values, its summary
    needs a copy or its workspace is too large to hold. ``launch_whole(ws, tensors, variant, width,
    table_written, flags)`` is the driver's launch of a whole one-chunk call (a ``ReplayPlan``
    records it)."""
    if key is None:
        return
    if not host_lengths and not BoundSummary.applies(call.device):
        return
    if not call.small and call.ws.nbytes > REPLAY_MAX_WORKSPACE:
        return
    plans = kept_plans()
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[key] = CallPlan(call, host_lengths) if call.small else ReplayPlan(call, host_lengths, launch_whole)


class _ValueChecks:
    """The per-call value checks both kinds of plan make, in the full path's order: ``start_checks``
    (queue the value summary, or check the host lengths), ``finish_checks`` (the summary's verdict,
    then ``validate=True``'s row check). Needs ``summary``, ``num_reqs``, ``num_drafts`` and ``storage``
    (the widest width the checked values allow)."""

    def start_checks(self, cu, draft_ids, temperature, draft_lengths) -> int | None:
        """The longest host draft, or None while the summary is in flight."""
        if self.summary is not None:
            self.summary.launch(cu, draft_ids, temperature)
            return None
        return int(check_host_lengths(draft_lengths, self.num_reqs, self.num_drafts).max())

    def finish_checks(self, max_k, target, draft, validate) -> int:
        """The checked longest draft."""
        if self.summary is not None:
            max_k = self.summary.verdict()
        if validate:
            check_rows(target, draft)
        return max_k


class CallPlan(_ValueChecks):
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
            geo = geometry(self.vocab_size, self.num_reqs, width)
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
        max_k = self.start_checks(cu, draft_ids, temperature, draft_lengths)
        out_num = torch.empty(num_reqs, dtype=torch.int32, device=device)
        size = num_reqs * self.storage
        ids_store = torch.empty(size, dtype=torch.int64, device=device)
        logprobs_store = torch.empty(size, dtype=torch.float32, device=device) if self.want_logprobs else None
        max_k = self.finish_checks(max_k, target, draft, validate)
        if self.table is not None:
            self.table(cu, temperature)
        width = max_k + 1
        launch_small = self.small_batch(width)
        launch_small(target, draft, draft_ids, cu, temperature, seeds, positions, ids_store, out_num,
                     logprobs_store, width)
        used = num_reqs * width
        out_logprobs = logprobs_store[:used].view(num_reqs, width) if self.want_logprobs else None
        return ids_store[:used].view(num_reqs, width), out_num, out_logprobs


class ReplayPlan(_ValueChecks):
    """A one-chunk call too large for the small-batch launch, replayed from a record of its launches
    per checked width (module docstring). Holds no caller tensor: a record keeps the workspace's
    tensors and the ints, and the slots of the call's tensors."""

    def __init__(self, call, host_lengths: bool, launch_whole):
        target, _, draft_ids, cu, _, _, _ = call.inputs
        self.num_reqs, self.num_drafts = call.num_reqs, draft_ids.numel()
        self.device, self.want_logprobs, self.storage = call.device, call.want_logprobs, call.max_width
        self.ws, self.flags, self.variant = call.ws, call.flags, call.variant
        self.summary = None if host_lengths else BoundSummary(cu, draft_ids, target.shape[1], call.ws)
        self.launch_whole = launch_whole
        self.workspace_tensors = {id(t) for t in vars(call.ws).values() if isinstance(t, _TENSOR)}
        self.replays: dict = {}

    def run(self, target, draft, draft_ids, cu, temperature, seeds, positions, draft_lengths, validate):
        """``rejection_sample``'s result for these inputs (whose layout is the plan's key)."""
        num_reqs, device = self.num_reqs, self.device
        max_k = self.start_checks(cu, draft_ids, temperature, draft_lengths)
        out_num = torch.empty(num_reqs, dtype=torch.int32, device=device)
        max_k = self.finish_checks(max_k, target, draft, validate)
        width = max_k + 1
        out_ids = torch.empty((num_reqs, width), dtype=torch.int64, device=device)
        out_logprobs = (torch.empty((num_reqs, width), dtype=torch.float32, device=device)
                        if self.want_logprobs else None)
        tensors = (target, draft, draft_ids, cu, temperature, seeds, positions,
                   out_ids, out_num, out_logprobs)
        steps = self.replays.get(width)
        if steps is None:
            with launch.recording() as launches:
                self.launch_whole(self.ws, tensors, self.variant, width, self.summary is not None, self.flags)
            steps = self.replay_steps(launches, tensors)
            if steps is not None and len(self.replays) < REPLAY_MAX_WIDTHS:
                self.replays[width] = steps
        else:
            for bound, fixed, slots in steps:
                args = fixed.copy()
                for position, slot in slots:
                    args[position] = tensors[slot]
                bound(*args)
        return out_ids, out_num, out_logprobs

    def replay_steps(self, launches, tensors):
        """``(bound launch, arguments with None at the slots, ((position, slot), ...))`` per recorded
        launch, or None when the record cannot be replayed: a tensor argument that is neither the
        workspace's nor one of ``tensors`` (or two of ``tensors`` are one object, so a slot would be
        ambiguous), or a launch that would not call a compiled kernel directly."""
        live = [t for t in tensors if t is not None]
        slot_of = {id(t): i for i, t in enumerate(tensors) if t is not None}
        if len(slot_of) != len(live):
            return None
        steps = []
        for kernel, grid, args, kwargs, variant in launches:
            bound = kernel.bind(grid, kwargs, variant)
            if not (getattr(bound, "direct", False) or kernels._device.INTERPRETING):
                return None
            fixed, slots = list(args), []
            for position, arg in enumerate(args):
                if isinstance(arg, _TENSOR):
                    slot = slot_of.get(id(arg))
                    if slot is not None:
                        slots.append((position, slot))
                        fixed[position] = None
                    elif id(arg) not in self.workspace_tensors:
                        return None
            steps.append((bound, fixed, tuple(slots)))
        return steps
