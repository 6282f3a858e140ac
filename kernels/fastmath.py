"""Fast float32 ``log2`` for the ALU-bound sampling race, and an accurate ``log1p``.

Compiled, ``fast_log2`` is the hardware approximation ``lg2.approx.ftz.f32`` (one MUFU instruction,
absolute error about 2^-22 in log2 units; inputs below 2^-126 flush to zero) where Triton's ``tl.log``
and ``tl.log2`` expand to some 40 instructions. ``tl.exp2`` already compiles to ``ex2.approx.ftz``.
Under the CPU interpreter both are NumPy's float32 functions. Race scores differ from the reference
by far less than the harness's race tolerance (``harness.decision_compare``: 1e-4 and up).
"""

from __future__ import annotations

import kernels._device
import triton
import triton.language as tl
from triton.language.extra import libdevice

HARDWARE_APPROX = tl.constexpr(not kernels._device.INTERPRETING)
LN2 = tl.constexpr(0.6931471805599453)
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def fast_log2(x):
    if HARDWARE_APPROX:
        return libdevice.fast_log2f(x)
    else:
        return tl.log2(x)


@triton.jit
def log1p(t):
    """``log(1 + t)`` for ``t >= -1`` to float32 accuracy, also where ``1 + t`` rounds to 1: a row's
    tail mass below float32's epsilon (a near-one-hot row at a tiny temperature) must survive, since
    the residual at a mode shared by target and draft is the difference of their tails. A 10-term
    series for ``|t| < 1/8`` (truncation below 1e-9 relative), ``log(1 + t)`` elsewhere."""
    series = t * (1.0 - t * (0.5 - t * (1.0 / 3 - t * (0.25 - t * (0.2 - t * (1.0 / 6 - t * (
        1.0 / 7 - t * (0.125 - t * (1.0 / 9 - t * 0.1)))))))))
    return tl.where(tl.abs(t) < 0.125, series, tl.log(1.0 + t))
