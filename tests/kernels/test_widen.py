"""``row_stats.widen`` (pass 1's bf16 -> float32 by shifting bits) against torch's conversion, for
every one of the 65536 bf16 bit patterns (NaN payloads, infinities, subnormals, both zeros)."""

from __future__ import annotations

import torch

import kernels._device
from kernels.row_stats import widen
from tests.kernels._elementwise import apply_elementwise


def _widened(x: torch.Tensor) -> torch.Tensor:
    return apply_elementwise(widen, x)


def _every_bf16(device) -> torch.Tensor:
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32, device=device).to(torch.int16)
    return bits.view(torch.bfloat16)


def test_widen_is_bit_exact_for_every_bf16_value():
    x = _every_bf16(kernels._device.default_device())
    got = _widened(x).view(torch.int32)
    want = x.to(torch.float32).view(torch.int32)
    assert torch.equal(got, want)


def test_a_wrong_shift_is_caught():
    """The comparison above fails for a conversion that is one bit off (shift by 15)."""
    x = _every_bf16("cpu")
    wrong = (x.view(torch.int16).to(torch.int32) << 15).view(torch.float32)
    assert not torch.equal(wrong.view(torch.int32), x.to(torch.float32).view(torch.int32))


def test_float32_and_float16_pass_through():
    device = kernels._device.default_device()
    for dtype in (torch.float32, torch.float16):
        x = torch.linspace(-30, 30, 2048, device=device).to(dtype)
        assert torch.equal(_widened(x), x.to(torch.float32))
