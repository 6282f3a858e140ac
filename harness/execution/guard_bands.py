"""Guard bands and poison: make out-of-bounds reads and writes, and unwritten outputs, visible.

- ``guarded_batch`` places every input tensor of a batch inside a larger buffer whose leading and
  trailing guard regions hold poison (huge logits, out-of-range ids, NaN temperatures). A kernel
  that reads outside its inputs then computes something different; one that writes outside them
  changes a guard.
- ``guarded_outputs`` does the same for caller-allocated outputs (kernels with ``verify_into``), and
  fills the outputs themselves with poison so that a slot the kernel forgets to write stands out.
- ``poison_allocator`` fills freed device memory with a byte pattern, so that ``torch.empty`` outputs
  a kernel forgets to initialise hold garbage rather than lucky zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from harness.contract import VerifyBatch, VerifyOutput

GUARD = 3  # guard rows (2-D) or elements (1-D) at least, on each side
ALIGN_ELEMENTS = 64  # guards are whole multiples of this: the view keeps the buffer's alignment
POISON_BYTE = 0x5A
_INPUT_POISON = {
    "target_logits": 1.0e4,
    "draft_logits": 1.0e4,
    "draft_token_ids": 2**40 + 7,
    "cu_num_draft_tokens": 2**30,
    "temperature": float("nan"),
    "seeds": -1,
    "positions": 2**50,
}


@dataclass
class Guarded:
    """A view into a flat buffer with guard regions; ``intact()`` says whether they are unchanged."""

    view: torch.Tensor
    buffer: torch.Tensor  # flat
    lead: int  # guard elements before the view
    guard_copy: torch.Tensor

    def guards(self) -> torch.Tensor:
        return torch.cat([self.buffer[: self.lead], self.buffer[self.lead + self.view.numel() :]])

    def intact(self) -> bool:
        g = self.guards()
        same = g == self.guard_copy
        if g.is_floating_point():
            same |= torch.isnan(g) & torch.isnan(self.guard_copy)
        return bool(same.all())


def guarded_copy(t: torch.Tensor, poison: float | int, fill_view_with: float | int | None = None) -> Guarded:
    """A copy of ``t`` (or a poisoned tensor of its shape) inside a flat buffer with guard regions.

    Each guard holds at least ``GUARD`` rows and is a multiple of ``ALIGN_ELEMENTS`` elements, so the
    view is exactly as aligned as a fresh allocation (Triton specialises kernels on pointer
    alignment: a misaligned view would only measure recompilation). Float 2-D guards hold one-hot
    rows (``+poison`` at column ``V // 2``, ``-poison`` elsewhere): a constant row would be invisible
    to softmax, while reading one of these makes a kernel emit ``V // 2`` almost surely.
    """
    row = max(int(t.shape[1]), 1) if t.dim() == 2 else 1
    lead = -(-GUARD * row // ALIGN_ELEMENTS) * ALIGN_ELEMENTS
    buffer = torch.full((lead + t.numel() + lead,), poison, dtype=t.dtype, device=t.device)
    if t.dim() == 2 and t.is_floating_point() and t.shape[1] > 1:
        column = (torch.arange(buffer.numel(), device=t.device) - lead) % t.shape[1]
        buffer.copy_(torch.where(column == t.shape[1] // 2, poison, -poison).to(t.dtype))
    view = buffer[lead : lead + t.numel()].view(t.shape)
    if fill_view_with is None:
        view.copy_(t)
    else:
        view.fill_(fill_view_with)
    copy = torch.cat([buffer[:lead], buffer[lead + t.numel() :]]).clone()
    return Guarded(view, buffer, lead, copy)


def guarded_batch(batch: VerifyBatch) -> tuple[VerifyBatch, dict[str, Guarded]]:
    """The same batch with every input a view into a poison-guarded buffer."""
    guarded = {
        name: guarded_copy(getattr(batch, name), poison)
        for name, poison in _INPUT_POISON.items()
        if getattr(batch, name) is not None
    }
    return replace(batch, **{name: g.view for name, g in guarded.items()}), guarded


def guarded_outputs(batch: VerifyBatch, with_logprobs: bool) -> tuple[VerifyOutput, dict[str, Guarded]]:
    """Poisoned, guard-banded output tensors of the contract's shapes, for ``verify_into``."""
    width = batch.max_draft_len + 1
    dev = batch.device
    ids = guarded_copy(
        torch.empty(batch.num_reqs, width, dtype=torch.int64, device=dev), 2**41 + 3, 0x5A5A5A5A5A
    )
    num = guarded_copy(torch.empty(batch.num_reqs, dtype=torch.int32, device=dev), 0x5A5A5A5A, 0x5A5A5A5A)
    guarded = {"output_token_ids": ids, "num_emitted": num}
    logprobs = None
    if with_logprobs:
        lp = guarded_copy(
            torch.empty(batch.num_reqs, width, dtype=torch.float32, device=dev), 7.0e7, float("nan")
        )
        guarded["logprobs"] = lp
        logprobs = lp.view
    return VerifyOutput(ids.view, num.view, logprobs), guarded


def poison_allocator(device: torch.device, sizes_bytes: tuple[int, ...] = (64, 512, 4096, 65536)) -> None:
    """Fill and free blocks of common sizes so that the allocator hands out dirty memory next.

    On the CPU the blocks are NumPy arrays: the same C heap torch allocates from, filled without
    torch's intra-op threads (a 64 KiB ``torch.full`` cost 8 ms of CPU on a loaded 2-core machine,
    and the supervised worker poisons before every call)."""
    if device.type == "cpu":
        blocks = [np.full(n, POISON_BYTE, dtype=np.uint8) for n in sizes_bytes]
    else:
        blocks = [torch.full((n,), POISON_BYTE, dtype=torch.uint8, device=device) for n in sizes_bytes]
    del blocks
