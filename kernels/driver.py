"""Host driver: argument checks, chunk planning and the launch sequence of one verification.

Launches per chunk (docs/kernels.md has the design, docs/kernels-log.md the measurements):

1. ``row_stats``      a row table (also zeroing the race counters; on the one-chunk default path
                      the value summary launch writes it), then one read of every target and draft
                      row: per-(row, vocab block) max and sum-exp at the request's temperature;
2. ``decide``         one program per request: combine the statistics, accept/reject (greedy and
                      token: final; block with draft logits: stage COMBINE, computing ``log p_i``);
                      a chunk of at most ``tuning.FUSE_DECIDE_MAX_REQS`` requests runs steps 1-4
                      in one launch instead (``fused_decide``);
3. ``residual_mass``  block with draft logits only: second read of the rows for ``Z_{i+1}``, then
                      ``decide`` stage DECIDE;
4. ``residual_sample`` one row per sampled request: split-vocabulary race; the last block of each
                      request combines and writes the correction/bonus token and its logprob.

Host cost is kept low because small batches are launch-bound: launch parameters are cached per
layout (``geometry``), the workspace of a one-chunk call is reused (``chunking.reusable_workspace``),
and ``FastLaunch`` is given a per-chunk ``launch_variant`` instead of keying every argument. A
one-chunk call (``OneChunkCall``) allocates and binds while its value check is in flight, so that
after the check a small batch only makes two tensor views and one launch; a one-chunk call whose
layout repeats runs its kept plan (``call_plan``), which skips the metadata checks and the binding
too (larger chunks replay their recorded launches).

Everything runs on the caller's stream. No host-device synchronisation except the single copy
``validation.check_values`` makes (skipped when the caller passes ``draft_lengths``).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

import kernels._device  # noqa: F401
import numpy as np
import torch

from kernels import call_plan, dependent_launch, tuning
from kernels.chunking import plan_for_budget, reusable_workspace, workspace_bytes_per_logit_row
from kernels.decide import launch_decide
from kernels.fused_decide import bind_small_batch, launch_small_batch, small_batch_applies
from kernels.launch import arg_spec
from kernels.residual_mass import launch_residual_mass
from kernels.residual_sample import launch_residual_sample
from kernels.row_stats import launch_row_stats
from kernels.tuning import geometry
from kernels.validation import PendingCheck, check_metadata, check_rows, check_values


@dataclass
class ChunkTensors:
    """The views of one chunk's inputs and outputs the launchers read (all chunk-local)."""

    target_logits: torch.Tensor
    draft_logits: torch.Tensor | None
    draft_token_ids: torch.Tensor
    cu: torch.Tensor
    temperature: torch.Tensor
    seeds: torch.Tensor
    positions: torch.Tensor
    out_ids: torch.Tensor
    out_num: torch.Tensor
    out_logprobs: torch.Tensor | None
    variant: tuple | None = None  # launch_variant(...): lets FastLaunch skip its per-argument key


def launch_variant(target_logits, draft_logits, draft_token_ids, cu, seeds, positions) -> tuple:
    """What decides the Triton specialisation of every verification launch of a chunk: the kernels
    specialise only the logit pointers (dtype, 16-byte alignment), their row strides and the
    vocabulary size (``launch.launch_jit``); every other pointer only by dtype (temperatures, outputs
    and workspace have fixed dtypes) and every count by its int32 range (rows < 2^31)."""
    draft = target_logits if draft_logits is None else draft_logits
    num_rows, vocab_size = target_logits.shape
    return (target_logits.dtype, draft.dtype, draft_token_ids.dtype, cu.dtype, seeds.dtype, positions.dtype,
            target_logits.data_ptr() % 16 == 0, draft.data_ptr() % 16 == 0,
            arg_spec(target_logits.stride(0)), arg_spec(draft.stride(0)), arg_spec(vocab_size),
            num_rows + draft.shape[0] < 2**31)


def rejection_sample(target_logits, draft_logits, draft_token_ids, cu_num_draft_tokens, temperature, seeds,
                     positions, *, method: str = "token", max_chunk_bytes: int | None = 1 << 30,
                     want_logprobs: bool = False, validate: bool = False,
                     draft_lengths: Sequence[int] | None = None):
    """Verify a batch of drafts (token or block verification, greedy rows mixed in).

    Arguments are the VerifyBatch fields of DESIGN.md. Returns ``(output_token_ids [R, max_k + 1]
    int64 with -1 padding, num_emitted [R] int32, logprobs [R, max_k + 1] float32 with 0.0 padding or
    None)``. ``max_chunk_bytes`` bounds the workspace of one chunk (``None``: unbounded); results do not
    depend on it. ``validate=True`` also rejects NaN or all ``-inf`` rows. ``draft_lengths`` (host
    ints or a NumPy integer array, optional) skips the one device-to-host copy; the caller then vouches
    for ``cu``, the draft ids and the temperatures (docs/kernels.md, "Bad input").
    """
    inputs = (target_logits, draft_logits, draft_token_ids, cu_num_draft_tokens, temperature, seeds,
              positions)
    key = call_plan.layout_key(*inputs, method, max_chunk_bytes, want_logprobs, draft_lengths is not None)
    plan = call_plan.find(key)
    if plan is not None:  # a repeated small layout: metadata known good, values checked as below
        return plan.run(*inputs, draft_lengths, validate)
    host = check_metadata(*inputs, method, max_chunk_bytes, want_logprobs, draft_lengths)
    num_logits, vocab_size = target_logits.shape
    num_reqs = cu_num_draft_tokens.numel() - 1
    device = target_logits.device
    if num_reqs and one_chunk(num_logits, vocab_size, num_reqs, max_chunk_bytes):
        # One chunk, so no plan and no host-side lengths: the summary launch also writes the row
        # table, and everything the launches need is prepared while the summary is in flight.
        call = OneChunkCall(*inputs, method, want_logprobs)
        if draft_lengths is None:
            pending = PendingCheck(draft_token_ids, cu_num_draft_tokens, temperature, vocab_size,
                                   want_lengths=False, table=call.ws)
            launch = call.bind(table_written=True)
            max_k = pending.result().max_draft_len
        else:
            launch = call.bind(table_written=False)
            max_k = int(host.max())
        if validate:
            check_rows(target_logits, draft_logits)
        result = launch(max_k + 1)
        call_plan.keep(key, call, host_lengths=draft_lengths is not None, launch_whole=launch_whole)
        return result
    out_num = torch.empty(num_reqs, dtype=torch.int32, device=device)
    if draft_lengths is None:
        max_k, lengths = check_values(draft_token_ids, cu_num_draft_tokens, temperature, vocab_size)
    else:
        lengths = host
        max_k = int(lengths.max()) if num_reqs else 0
    if validate:
        check_rows(target_logits, draft_logits)
    width = max_k + 1
    out_ids = torch.empty((num_reqs, width), dtype=torch.int64, device=device)
    out_logprobs = (torch.empty((num_reqs, width), dtype=torch.float32, device=device) if want_logprobs
                    else None)
    verify_into(out_ids, out_num, out_logprobs, target_logits, draft_logits, draft_token_ids,
                cu_num_draft_tokens, temperature, seeds, positions, lengths, method=method,
                max_chunk_bytes=max_chunk_bytes)
    return out_ids, out_num, out_logprobs


def launch_flags(method: str, has_draft: bool, want_logprobs: bool) -> dict:
    """The keyword flags of ``_launch_chunk`` (and the small-batch launch) for a call."""
    block_method = method == "block"
    return dict(block_method=block_method, has_draft=has_draft, want_logprobs=want_logprobs,
                two_stage=block_method and has_draft)


class OneChunkCall:
    """A call that runs as one chunk, split around its value check so that only the launches wait
    for it: construct (the kept workspace, whose row table the value summary writes), then
    ``bind()`` while the summary is in flight, then ``launch(width)`` once the check has passed.

    Small batches (``small_batch_applies``) are allocated and bound before the width is known:
    their outputs are views of storages sized for the widest output the checked values allow
    (``num_drafts + 1`` per request, the exact width for one request), so after the check only the
    views and one launch remain. Larger chunks allocate at the checked width and launch as
    ``verify_into`` does."""

    def __init__(self, target_logits, draft_logits, draft_token_ids, cu, temperature, seeds, positions,
                 method: str, want_logprobs: bool):
        num_logits, vocab_size = target_logits.shape
        self.num_reqs = num_reqs = cu.numel() - 1
        self.device = target_logits.device
        self.want_logprobs = want_logprobs
        num_drafts = num_logits - num_reqs
        # The width is only known after the check, and the geometry's ROWS depends on it. Every width
        # the checked values allow lies in [ceil(drafts / reqs) + 1, drafts + 1]: where both ends
        # give the same geometry (always for one request, and whenever drafts + 1 <= 16), it is
        # fixed now; otherwise the launch takes it from the width.
        self.max_width = num_drafts + 1
        self.geo = geometry(vocab_size, num_reqs, self.max_width)
        narrowest = -(-num_drafts // num_reqs) + 1
        self.geo_fixed = self.geo == geometry(vocab_size, num_reqs, narrowest)
        self.ws = reusable_workspace((num_logits, num_drafts, num_reqs, self.geo.num_vblocks,
                                      self.geo.race_blocks), self.device)
        self.flags = launch_flags(method, draft_logits is not None, want_logprobs)
        self.inputs = (target_logits, draft_logits, draft_token_ids, cu, temperature, seeds, positions)
        self.small = small_batch_applies(num_reqs, self.flags["two_stage"], num_drafts)

    def bind(self, table_written: bool):
        """Returns ``launch(width) -> (output_token_ids, num_emitted, logprobs_or_None)``."""
        target_logits, draft_logits, draft_token_ids, cu, temperature, seeds, positions = self.inputs
        variant = launch_variant(target_logits, draft_logits, draft_token_ids, cu, seeds, positions)
        self.variant = variant  # kept for a call plan (call_plan.keep)
        num_reqs, device = self.num_reqs, self.device
        out_num = torch.empty(num_reqs, dtype=torch.int32, device=device)
        if not (self.small and self.geo_fixed):
            def launch_chunk(width: int):
                out_ids = torch.empty((num_reqs, width), dtype=torch.int64, device=device)
                out_logprobs = (torch.empty((num_reqs, width), dtype=torch.float32, device=device)
                                if self.want_logprobs else None)
                launch_whole(self.ws, (*self.inputs, out_ids, out_num, out_logprobs), variant, width,
                             table_written, self.flags)
                return out_ids, out_num, out_logprobs
            return launch_chunk
        size = num_reqs * self.max_width
        ids_store = torch.empty(size, dtype=torch.int64, device=device)
        logprobs_store = torch.empty(size, dtype=torch.float32, device=device) if self.want_logprobs else None
        chunk = ChunkTensors(*self.inputs, ids_store, out_num, logprobs_store, variant)
        kernel = bind_small_batch(self.ws, chunk, num_reqs, self.geo, table_written=table_written,
                                  **self.flags)

        def launch_small(width: int):
            kernel(width)
            used = num_reqs * width
            out_logprobs = logprobs_store[:used].view(num_reqs, width) if self.want_logprobs else None
            return ids_store[:used].view(num_reqs, width), out_num, out_logprobs
        return launch_small


def launch_whole(ws, tensors, variant, width: int, table_written: bool, flags: dict) -> None:
    """The launches of a one-chunk call: ``tensors`` are ``ChunkTensors``' fields in order (inputs, then
    ``out_ids`` of ``width`` columns, ``out_num``, ``out_logprobs``), ``flags`` are ``launch_flags``'.
    Everything it enqueues goes through ``FastLaunch``, which is what a call plan records and replays
    (kernels/call_plan.py ``ReplayPlan``): a torch operation here would be skipped on replay."""
    num_reqs = tensors[3].numel() - 1
    geo = geometry(tensors[0].shape[1], num_reqs, width)
    _launch_chunk(ws, ChunkTensors(*tensors, variant), num_reqs, geo, table_written=table_written, **flags)


def one_chunk(num_logits: int, vocab_size: int, num_reqs: int, max_chunk_bytes: int | None,
              block_size: int | None = None) -> bool:
    """Whether the call runs as one chunk (no plan, so no host-side lengths needed): decided by the
    shapes alone."""
    if max_chunk_bytes is None or num_reqs == 0:
        return True
    geo = geometry(vocab_size, num_reqs, 1, block_size)  # the width does not matter here
    return num_logits <= max(1, max_chunk_bytes // workspace_bytes_per_logit_row(geo.num_vblocks,
                                                                                 geo.race_blocks))


def verify_into(out_ids, out_num, out_logprobs, target_logits, draft_logits, draft_token_ids, cu, temperature,
                seeds, positions, lengths: Sequence[int] | None, *, method: str, max_chunk_bytes: int | None,
                block_size: int | None = None) -> list[int]:
    """Fill preallocated outputs (every entry is written). Arguments must already be checked.

    ``lengths`` (host draft lengths) may be None when ``one_chunk`` holds: only a plan needs them.
    Returns the workspace bytes of each chunk (for the memory-bound tests).
    """
    num_logits, vocab_size = target_logits.shape
    num_reqs = cu.numel() - 1
    if num_reqs == 0:
        return []
    geo = geometry(vocab_size, num_reqs, out_ids.shape[1], block_size)
    has_draft = draft_logits is not None
    flags = launch_flags(method, has_draft, out_logprobs is not None)
    num_drafts = num_logits - num_reqs
    if one_chunk(num_logits, vocab_size, num_reqs, max_chunk_bytes, block_size):
        # The common case: one chunk, the caller's tensors as they are, a reusable workspace.
        ws = reusable_workspace((num_logits, num_drafts, num_reqs, geo.num_vblocks, geo.race_blocks),
                                target_logits.device)
        variant = launch_variant(target_logits, draft_logits, draft_token_ids, cu, seeds, positions)
        chunk = ChunkTensors(target_logits, draft_logits, draft_token_ids, cu, temperature, seeds, positions,
                             out_ids, out_num, out_logprobs, variant)
        _launch_chunk(ws, chunk, num_reqs, geo, **flags)
        return [ws.nbytes]
    if lengths is None:
        raise ValueError("lengths: host draft lengths are needed to plan chunks")
    plan = plan_for_budget(lengths, geo.num_vblocks, geo.race_blocks, max_chunk_bytes)
    lengths = np.asarray(lengths, dtype=np.int64)
    first_draft = np.concatenate(([0], np.cumsum(lengths)))
    workspace_sizes = []
    for start, end in plan:
        d0, d1 = int(first_draft[start]), int(first_draft[end])
        chunk = ChunkTensors(
            target_logits=target_logits[d0 + start:d1 + end],
            draft_logits=draft_logits[d0:d1] if has_draft else None,
            draft_token_ids=draft_token_ids[d0:d1], cu=cu[start:end + 1],
            temperature=temperature[start:end], seeds=seeds[start:end],
            positions=positions[start:end],
            out_ids=out_ids[start:end], out_num=out_num[start:end],
            out_logprobs=out_logprobs[start:end] if out_logprobs is not None else None,
        )
        chunk.variant = launch_variant(chunk.target_logits, chunk.draft_logits, chunk.draft_token_ids,
                                       chunk.cu, chunk.seeds, chunk.positions)
        num_chunk = end - start
        ws = reusable_workspace((d1 - d0 + num_chunk, d1 - d0, num_chunk, geo.num_vblocks, geo.race_blocks),
                                target_logits.device)
        workspace_sizes.append(ws.nbytes)
        _launch_chunk(ws, chunk, num_chunk, geo, **flags)
        del ws
    return workspace_sizes


def _launch_chunk(ws, chunk, num_reqs, geo, *, block_method, has_draft, want_logprobs, two_stage,
                  table_written=False):
    """The launch sequence of one chunk (module docstring). A chunk of at most
    ``tuning.FUSE_DECIDE_MAX_REQS`` requests runs as one launch instead (kernels/fused_decide.py; the
    same results bit for bit)."""
    if small_batch_applies(num_reqs, two_stage, chunk.draft_token_ids.shape[0]):
        launch_small_batch(ws, chunk, num_reqs, geo, block_method=block_method, has_draft=has_draft,
                           two_stage=two_stage, want_logprobs=want_logprobs, table_written=table_written)
        return
    # After the chunk's first kernel, each kernel is a dependent launch (kernels/dependent_launch.py).
    pdl = dependent_launch.enabled(chunk.target_logits.device)
    launch_row_stats(ws, chunk.target_logits, chunk.draft_logits, chunk.cu, chunk.temperature, num_reqs,
                     geo.block_v, variant=chunk.variant, table_written=table_written, pdl=pdl)
    common = dict(block_method=block_method, has_draft=has_draft, want_logprobs=want_logprobs,
                  rows=geo.rows_pow2, nvb_pow2=geo.nvb_pow2, pdl=pdl)
    # Z enters block verification's h_i from slot 1 on: with at most one draft per request (output
    # width <= 2) no mass is ever wanted, so decide runs in one stage and pass 2 is not launched.
    two_stage = two_stage and chunk.out_ids.shape[1] > 2
    launch_decide(ws, chunk, num_reqs, combine=True, decide=not two_stage, **common)
    if two_stage:
        launch_residual_mass(ws, chunk, num_reqs, geo.block_v, pdl)
        launch_decide(ws, chunk, num_reqs, combine=False, decide=True, **common)
    # Pruning is decided per chunk (the batch's geometry is shared by its chunks): a small chunk of a
    # large chunked call races unpruned, which is faster there (tuning.RACE_PRUNE_MIN_ENTRIES).
    race = dict(has_draft=has_draft, want_logprobs=want_logprobs, race_block=geo.race_block,
                race_blocks=geo.race_blocks, nvb_pow2=geo.race_pow2,
                prune=tuning.race_prune(num_reqs * chunk.target_logits.shape[1]))
    launch_residual_sample(ws, chunk, num_reqs, pdl=pdl, **race)
