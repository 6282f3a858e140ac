"""Argument checks for ``rejection_sample``: every failure is a ValueError naming the argument,
raised before any kernel launch.

Metadata (types, shapes, dtypes, devices) is checked on the host for free. Values (``cu``
monotonicity, at most ``MAX_DRAFT_TOKENS`` drafts per request, draft ids in ``[-1, V)``, temperatures
``>= 0`` and not NaN) need the device data: a
one-program kernel summarises them (seven scalars, plus ``cu`` itself when chunk planning needs the
host-side lengths) and they come back in ONE copy into pinned memory; the driver prepares its
launches while that copy is in flight (``PendingCheck``). This launch is the only one before the
checks pass; it reads the arguments and writes only the call's own workspace (its summary and, on
one-chunk calls, the row table, with clamped spans). A caller that passes
``draft_lengths`` (host ints it already has) skips that copy and vouches for those values; the
kernels still never read or write out of bounds or emit an id outside ``[0, V)`` whatever the values
are.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import kernels._device  # noqa: F401
import numpy as np
import torch
import triton
import triton.language as tl

from kernels.launch import current_stream, device_index, launch_jit
from kernels.row_stats import TABLE_BLOCK, write_row_table

LOGIT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INT_DTYPES = (torch.int32, torch.int64)
METHODS = ("token", "block")
# The longest draft of one request. The decide launch holds a request's rows in one tile of
# next_power_of_2(k + 1) rows (kernels/geometry.py): 128 rows compile in 2-9 s on the H200, a
# 2048-row tile (a 2000-token draft) did not finish compiling in 7 minutes, so longer drafts are refused.
MAX_DRAFT_TOKENS = 127


def _fail(name: str, message: str):
    raise ValueError(f"{name}: {message}")


def _tensor(name, value, ndim, dtypes, device):
    if not isinstance(value, torch.Tensor):
        _fail(name, f"expected a torch.Tensor, got {type(value).__name__}")
    if value.layout is not torch.strided or value.is_nested:
        _fail(name, f"expected a dense (strided) tensor, got layout {value.layout}")
    if value.dim() != ndim:
        _fail(name, f"expected {ndim} dimension(s), got shape {tuple(value.shape)}")
    if value.dtype not in dtypes:
        _fail(name, f"dtype {value.dtype} not in {[str(d) for d in dtypes]}")
    if device is not None and value.device != device:
        _fail(name, f"on {value.device}, expected {device} (the device of target_logits)")
    if ndim == 1 and value.numel() > 1 and value.stride(0) != 1:
        _fail(name, "must be contiguous")


def check_metadata(target_logits, draft_logits, draft_token_ids, cu_num_draft_tokens, temperature, seeds,
                   positions, method, max_chunk_bytes, want_logprobs, draft_lengths) -> np.ndarray | None:
    """Everything that can be checked without reading device memory. Returns ``draft_lengths`` as an
    int64 array (None when not given)."""
    _tensor("target_logits", target_logits, 2, LOGIT_DTYPES, None)
    device = target_logits.device
    if not kernels._device.INTERPRETING and device.type != "cuda":
        _fail("target_logits", f"on {device}: compiled Triton kernels need CUDA tensors "
                               "(TRITON_INTERPRET=1 runs them on the CPU)")
    num_logits, vocab_size = target_logits.shape
    if vocab_size < 1:
        _fail("target_logits", "vocabulary size must be >= 1")
    if vocab_size > 1 and num_logits and target_logits.stride(1) != 1:
        _fail("target_logits", "must be contiguous along the vocabulary (stride(1) == 1)")
    _tensor("cu_num_draft_tokens", cu_num_draft_tokens, 1, INT_DTYPES, device)
    num_reqs = cu_num_draft_tokens.numel() - 1
    if num_reqs < 0:
        _fail("cu_num_draft_tokens", "must hold num_reqs + 1 >= 1 entries")
    _tensor("draft_token_ids", draft_token_ids, 1, INT_DTYPES, device)
    num_drafts = draft_token_ids.numel()
    if num_logits != num_drafts + num_reqs:
        _fail("target_logits", f"has {num_logits} rows, expected num_draft_total + num_reqs = "
                               f"{num_drafts} + {num_reqs}")
    if draft_logits is not None:
        _tensor("draft_logits", draft_logits, 2, LOGIT_DTYPES, device)
        if draft_logits.dtype != target_logits.dtype:
            _fail("draft_logits",
                  f"dtype {draft_logits.dtype} differs from target_logits' {target_logits.dtype}")
        if tuple(draft_logits.shape) != (num_drafts, vocab_size):
            _fail("draft_logits", f"shape {tuple(draft_logits.shape)}, expected ({num_drafts}, {vocab_size})")
        if vocab_size > 1 and draft_logits.shape[0] and draft_logits.stride(1) != 1:
            _fail("draft_logits", "must be contiguous along the vocabulary (stride(1) == 1)")
    for name, value, dtypes in (("temperature", temperature, (torch.float32,)),
                                ("seeds", seeds, INT_DTYPES), ("positions", positions, INT_DTYPES)):
        _tensor(name, value, 1, dtypes, device)
        if value.numel() != num_reqs:
            _fail(name, f"has {value.numel()} entries, expected num_reqs = {num_reqs}")
    if method not in METHODS:
        _fail("method", f"must be one of {METHODS}, got {method!r}")
    if max_chunk_bytes is not None and (isinstance(max_chunk_bytes, bool)
                                        or not isinstance(max_chunk_bytes, int) or max_chunk_bytes < 1):
        _fail("max_chunk_bytes", f"must be a positive int or None, got {max_chunk_bytes!r}")
    if not isinstance(want_logprobs, bool):
        _fail("want_logprobs", f"must be a bool, got {want_logprobs!r}")
    if draft_lengths is not None:
        return check_host_lengths(draft_lengths, num_reqs, num_drafts)
    return None


def check_host_lengths(draft_lengths, num_reqs: int, num_drafts: int) -> np.ndarray:
    """``draft_lengths`` as an int64 array: ``num_reqs`` non-negative host ints summing to ``num_drafts``."""
    lengths = host_lengths(draft_lengths)
    if lengths is None or lengths.size != num_reqs or (lengths.size and lengths.min() < 0):
        _fail("draft_lengths", f"must be {num_reqs} non-negative host ints")
    total = int(lengths.sum())
    if total != num_drafts:
        _fail("draft_lengths", f"sum {total} != num_draft_total {num_drafts}")
    if lengths.size and lengths.max() > MAX_DRAFT_TOKENS:
        _fail("draft_lengths", _too_long(int(lengths.max())))
    return lengths


def _too_long(longest: int) -> str:
    return f"a request has {longest} draft tokens, at most {MAX_DRAFT_TOKENS} are supported"


def host_lengths(draft_lengths) -> np.ndarray | None:
    """``draft_lengths`` (a sequence of Python ints or a NumPy integer array) as an int64 array, or
    None when it holds anything else (floats, bools, tensors). Vectorised: microseconds for thousands of
    requests."""
    if isinstance(draft_lengths, np.ndarray):
        integers = draft_lengths.ndim == 1 and draft_lengths.dtype.kind in "iu"
        return draft_lengths.astype(np.int64) if integers else None
    values = list(draft_lengths)
    if not set(map(type, values)) <= {int}:
        return None
    return np.asarray(values, dtype=np.int64).reshape(-1)


SUMMARY_SCALARS = 7  # words of the value summary before its copy of cu (kernel docstring)


@launch_jit(counts=("num_reqs", "num_drafts"),
            small_pointers=("cu_ptr", "ids_ptr", "temperature_ptr", "out_ptr", "row_scale_ptr",
                            "row_req_ptr", "done_ptr", "sync_ptr"))
def _summarise_values_kernel(cu_ptr, ids_ptr, temperature_ptr, out_ptr, row_scale_ptr, row_req_ptr, done_ptr,
                             sync_ptr, num_reqs, num_drafts, BLOCK: tl.constexpr, SCALARS: tl.constexpr,
                             COPY_CU: tl.constexpr, WRITE_TABLE: tl.constexpr, TABLE_BLOCK: tl.constexpr):
    """Program 0: out = [cu[0], cu[num_reqs], min and max of cu[r+1] - cu[r] (0 without requests),
    min and max draft id, count of temperatures not >= 0] (``SCALARS`` words) then, with ``COPY_CU``,
    cu itself (num_reqs + 1 values). With ``WRITE_TABLE`` (one program per request) every program
    also writes its request's rows of the row table, which saves the one-chunk default path a launch
    after the sync; the spans are clamped, so unchecked values stay inside the workspace."""
    if WRITE_TABLE:
        write_row_table(tl.program_id(0), cu_ptr, temperature_ptr, row_scale_ptr, row_req_ptr, done_ptr,
                        sync_ptr, num_drafts + num_reqs, num_reqs, TABLE_BLOCK)
    if tl.program_id(0) == 0:
        _summarise(cu_ptr, ids_ptr, temperature_ptr, out_ptr, num_reqs, num_drafts, BLOCK, SCALARS, COPY_CU)


@triton.jit
def _summarise(cu_ptr, ids_ptr, temperature_ptr, out_ptr, num_reqs, num_drafts, BLOCK: tl.constexpr,
               SCALARS: tl.constexpr, COPY_CU: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    step_low = tl.full((BLOCK,), 2**62, tl.int64)
    step_high = tl.full((BLOCK,), -(2**62), tl.int64)
    bad = tl.zeros((BLOCK,), tl.int64)
    for start in range(0, num_reqs, BLOCK):
        idx = start + offs
        live = idx < num_reqs
        step = (tl.load(cu_ptr + idx + 1, mask=live, other=0).to(tl.int64)
                - tl.load(cu_ptr + idx, mask=live, other=0).to(tl.int64))
        step_low = tl.where(live, tl.minimum(step_low, step), step_low)
        step_high = tl.where(live, tl.maximum(step_high, step), step_high)
        t = tl.load(temperature_ptr + idx, mask=live, other=1.0)
        bad += tl.where(t >= 0, 0, 1)
    if COPY_CU:
        for start in range(0, num_reqs + 1, BLOCK):
            idx = start + offs
            cu = tl.load(cu_ptr + idx, mask=idx <= num_reqs).to(tl.int64)
            tl.store(out_ptr + SCALARS + idx, cu, mask=idx <= num_reqs)
    low = tl.full((BLOCK,), 2**62, tl.int64)
    high = tl.full((BLOCK,), -(2**62), tl.int64)
    for start in range(0, num_drafts, BLOCK):
        idx = start + offs
        x = tl.load(ids_ptr + idx, mask=idx < num_drafts, other=0).to(tl.int64)
        low = tl.where(idx < num_drafts, tl.minimum(low, x), low)
        high = tl.where(idx < num_drafts, tl.maximum(high, x), high)
    no_reqs = num_reqs == 0
    tl.store(out_ptr + 0, tl.load(cu_ptr).to(tl.int64))
    tl.store(out_ptr + 1, tl.load(cu_ptr + num_reqs).to(tl.int64))
    tl.store(out_ptr + 2, tl.where(no_reqs, 0, tl.min(step_low, axis=0)))
    tl.store(out_ptr + 3, tl.where(no_reqs, 0, tl.max(step_high, axis=0)))
    tl.store(out_ptr + 4, tl.min(low, axis=0))
    tl.store(out_ptr + 5, tl.max(high, axis=0))
    tl.store(out_ptr + 6, tl.sum(bad, axis=0))


def _summary_constexprs(copy_cu: bool, write_table: bool) -> dict:
    """The summary launch's constexprs, in one order for ``PendingCheck`` and ``BoundSummary`` (the
    order is part of ``FastLaunch``'s cache key)."""
    return dict(BLOCK=1024, SCALARS=SUMMARY_SCALARS, COPY_CU=copy_cu, WRITE_TABLE=write_table,
                TABLE_BLOCK=TABLE_BLOCK)


def _summary_variant(cu, draft_token_ids) -> tuple:
    """What decides the summary kernel's specialisation (``FastLaunch`` variant)."""
    return ("summary", cu.dtype, draft_token_ids.dtype, cu.numel() - 1 + draft_token_ids.numel() < 2**31)


class CheckedValues(NamedTuple):
    """What the value check tells the host: the longest draft and, when asked for, every length."""

    max_draft_len: int
    lengths: np.ndarray | None


_buffers = threading.local()
# Whether the summary kernel may store straight into pinned host memory (CUDA maps pinned memory
# into the device's address space under unified addressing); cleared, and a copy used instead, if the
# launcher refuses the host pointer.
_ZERO_COPY = True


def _summary_buffers(device: torch.device, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This thread's (device, host) summary buffers, grown to ``size`` words. The host one is pinned,
    so the summary kernel can write it directly (or a copy is a plain DMA). Reuse is safe: a call reads
    its summary before it returns."""
    kept = getattr(_buffers, "entries", None)
    if kept is None:
        kept = _buffers.entries = {}
    entry = kept.get(device)
    if entry is None or entry[0].numel() < size:
        size = max(size, 64)
        on_device = torch.empty(size, dtype=torch.int64, device=device)
        host = on_device if device.type != "cuda" else torch.empty(size, dtype=torch.int64, pin_memory=True)
        entry = kept[device] = (on_device, host)
    return entry


class PendingCheck:
    """A launched value summary on its way to the host; :meth:`result` waits for it.

    On CUDA the summary kernel stores into pinned host memory directly (mapped under unified
    addressing), which saves the host a copy launch; where the launcher refuses a host pointer it
    writes a device buffer and one copy follows."""

    def __init__(self, draft_token_ids, cu_num_draft_tokens, temperature, vocab_size: int,
                 want_lengths: bool, table=None):
        """``table``: the one-chunk workspace whose row table the summary launch also writes."""
        self.num_drafts = draft_token_ids.numel()
        self.num_reqs = cu_num_draft_tokens.numel() - 1
        self.vocab_size = vocab_size
        self.want_lengths = want_lengths
        device = cu_num_draft_tokens.device
        size = SUMMARY_SCALARS + (self.num_reqs + 1 if want_lengths else 0)
        on_device, self._host = _summary_buffers(device, size)
        cuda = device.type == "cuda"
        self._size = size
        self._stream = current_stream(device_index(device)) if cuda else None
        write_table = table is not None and self.num_reqs > 0
        table_views = ((table.row_scale, table.row_req, table.done, table.sync) if write_table
                       else (on_device,) * 4)

        def summarise(out):
            _summarise_values_kernel[(self.num_reqs if write_table else 1,)](
                cu_num_draft_tokens, draft_token_ids, temperature, out, *table_views, self.num_reqs,
                self.num_drafts, **_summary_constexprs(want_lengths, write_table),
                variant=_summary_variant(cu_num_draft_tokens, draft_token_ids))

        global _ZERO_COPY
        if cuda and _ZERO_COPY:
            try:
                summarise(self._host)
                return
            except ValueError as error:  # the launcher refused the host pointer (no unified addressing)
                if "cannot be accessed" not in str(error):
                    raise
                _ZERO_COPY = False
        summarise(on_device)
        if cuda:
            self._host[:size].copy_(on_device[:size], non_blocking=True)

    def result(self) -> CheckedValues:
        """Waits for the summary, raises ``ValueError`` naming the argument on a bad value."""
        if self._stream is not None:
            self._stream.synchronize()
        summary = self._host[:self._size].numpy()
        max_step = check_summary(summary, self.num_drafts, self.vocab_size)
        lengths = np.diff(summary[SUMMARY_SCALARS:]) if self.want_lengths else None
        return CheckedValues(max_step, lengths)


def check_summary(summary: np.ndarray, num_drafts: int, vocab_size: int) -> int:
    """The verdict on a value summary (``_summarise_values_kernel``'s scalars, read on the host):
    ``ValueError`` naming the argument on a bad value, else the longest draft."""
    cu0, cu_end, min_step, max_step, low, high, bad = summary[:SUMMARY_SCALARS].tolist()
    if cu0 != 0:
        _fail("cu_num_draft_tokens", f"must start at 0, starts at {cu0}")
    if min_step < 0:
        _fail("cu_num_draft_tokens", "must be non-decreasing")
    if cu_end != num_drafts:
        _fail("cu_num_draft_tokens", f"ends at {cu_end}, expected num_draft_total = {num_drafts}")
    if num_drafts and (low < -1 or high >= vocab_size):
        _fail("draft_token_ids",
              f"ids must lie in [0, {vocab_size}) (or be -1 padding), got range [{low}, {high}]")
    if bad:
        _fail("temperature", f"{bad} entries are negative or NaN")
    if max_step > MAX_DRAFT_TOKENS:
        _fail("cu_num_draft_tokens", _too_long(max_step))
    return max_step


class BoundSummary:
    """The one-chunk value summary (which also writes the row table into ``table``) with its layout
    bound, for ``kernels/call_plan.py``: ``launch(cu, draft_ids, temperature)`` queues it, ``verdict()``
    waits for it and checks it as ``PendingCheck.result`` does (the longest draft, or ``ValueError``).
    Only where the summary needs no copy (``applies``): stored by the kernel into pinned host
    memory on CUDA, or a host tensor under the interpreter."""

    def __init__(self, cu, draft_token_ids, vocab_size: int, table):
        device = cu.device
        self.num_reqs, self.num_drafts, self.vocab_size = cu.numel() - 1, draft_token_ids.numel(), vocab_size
        on_device, host = _summary_buffers(device, SUMMARY_SCALARS)
        self.out = host
        self.summary = host[:SUMMARY_SCALARS].numpy()  # a view: read after the wait
        self.stream = current_stream(device_index(device)) if device.type == "cuda" else None
        self.tail = (table.row_scale, table.row_req, table.done, table.sync, self.num_reqs, self.num_drafts)
        self.kernel = _summarise_values_kernel.bind((self.num_reqs,), _summary_constexprs(False, True),
                                                    _summary_variant(cu, draft_token_ids))

    @staticmethod
    def applies(device: torch.device) -> bool:
        return device.type != "cuda" or _ZERO_COPY

    def launch(self, cu, draft_token_ids, temperature) -> None:
        self.kernel(cu, draft_token_ids, temperature, self.out, *self.tail)

    def verdict(self) -> int:
        if self.stream is not None:
            self.stream.synchronize()
        return check_summary(self.summary, self.num_drafts, self.vocab_size)


def check_values(draft_token_ids, cu_num_draft_tokens, temperature, vocab_size: int,
                 want_lengths: bool = True) -> CheckedValues:
    """Value checks through one launch and one device-to-host copy (``PendingCheck`` splits the two
    so the host can prepare the launches while the copy is in flight)."""
    return PendingCheck(draft_token_ids, cu_num_draft_tokens, temperature, vocab_size, want_lengths).result()


def check_rows(target_logits, draft_logits) -> None:
    """``validate=True``: NaN anywhere, or a target row that is all ``-inf``, raises (one sync)."""
    flags = [torch.isnan(target_logits).any(), (target_logits == float("-inf")).all(dim=1).any()]
    if draft_logits is not None and draft_logits.numel():
        flags += [torch.isnan(draft_logits).any(), (draft_logits == float("-inf")).all(dim=1).any()]
    found = torch.stack(flags).tolist()
    if found[0]:
        _fail("target_logits", "contains NaN")
    if found[1]:
        _fail("target_logits", "has a row that is entirely -inf")
    if len(found) > 2 and found[2]:
        _fail("draft_logits", "contains NaN")
    if len(found) > 2 and found[3]:
        _fail("draft_logits", "has a row that is entirely -inf")
