"""One elementwise test kernel for the device helpers (``FN``: any ``triton.jit`` function of one
tensor), so each helper's test only states its inputs and its bound."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _elementwise_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs, mask=mask, other=0.0)), mask=mask)


def apply_elementwise(fn, x: torch.Tensor, out_dtype=torch.float32) -> torch.Tensor:
    """``fn`` applied to every element of the 1-D tensor ``x`` on its device."""
    out = torch.empty(x.numel(), dtype=out_dtype, device=x.device)
    _elementwise_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), FN=fn, BLOCK=1024)
    return out
