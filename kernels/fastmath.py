"""Fast float32 ``log2`` for the ALU-bound sampling race, an accurate ``log1p`` and ``1 - 2^g``.

Compiled, ``fast_log2`` is the hardware approximation ``lg2.approx.ftz.f32`` (one MUFU instruction,
absolute error about 2^-22 in log2 units; inputs below 2^-126 flush to zero) where Triton's ``tl.log``
and ``tl.log2`` expand to some 40 instructions. ``tl.exp2`` already compiles to ``ex2.approx.ftz``.
Under the CPU interpreter both are NumPy's float32 functions. Race scores differ from the reference
by far less than the harness's race tolerance (``harness.judging.decision_compare``: 1e-4 and up).
"""

from __future__ import annotations

from kernels._device import COMPILED
import triton
import triton.language as tl
from triton.language.extra import libdevice

LN2 = tl.constexpr(0.6931471805599453)
LOG2E = tl.constexpr(1.4426950408889634)
ONE_SIXTH = tl.constexpr(1.0 / 6.0)
ONE_24TH = tl.constexpr(1.0 / 24.0)
ONE_120TH = tl.constexpr(1.0 / 120.0)
# 1 - 2^g = g (S0 + g (S1 + g (S2 + g S3))) on [-1/8, 0), S0 = -ln 2: a minimax fit in relative error
# (4e-9; the five-term expm1 series of one_minus_exp2: 7e-9, one FMUL and a min more)
EXPM1_S0 = tl.constexpr(-0.6931471805599453)
EXPM1_S1 = tl.constexpr(-0.24022604525089264)
EXPM1_S2 = tl.constexpr(-0.05548139661550522)
EXPM1_S3 = tl.constexpr(-0.009303565137088299)


@triton.jit
def fast_log2(x):
    if COMPILED:
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


@triton.jit
def one_minus_exp2(g):
    """``1 - 2^g`` for ``g <= 0`` (log2 units) to float32 relative accuracy, also where ``2^g``
    rounds to 1: for ``g > -1/8`` the ``expm1`` series (5 terms, relative error < 1e-8), so
    ``1 - p`` of a ``p`` within float32's epsilon of 1 keeps the precision ``log p`` carries.
    ``g = -inf`` gives 1, ``g >= 0`` gives 0. The decide kernel's scalar form (``1 - p``, the
    point-mass ``1 - b(x)``); the per-element passes use ``one_minus_exp2_negative``, one FMUL and
    the clamp fewer (an earlier variant of that fit raised pass 2's float32 registers from 80 to 117 and
    its time by 4 %; v14's pass 2 takes 115 and is faster than before, docs/kernels-log.md). Not merged
    with it: decide's results would move by float32 rounding and that has not been run on a GPU."""
    below = tl.minimum(g, 0.0)
    z = below * LN2
    near = -z * (1.0 + z * (0.5 + z * (ONE_SIXTH + z * (ONE_24TH + z * ONE_120TH))))
    return tl.where(g > -0.125, near, 1.0 - tl.exp2(below))


@triton.jit
def one_minus_exp2_negative(gap):
    """``1 - 2^gap`` for ``gap < 0`` (log2 units) to float32 relative accuracy, the per-element form
    of the ALU-bound race and pass 2: the cubic fit above for ``gap > -1/8``, ``1 - 2^gap`` below
    (within 2^-24 relative there). ``gap = -inf`` gives 1; ``gap >= 0`` gives a value <= 0 and NaN
    gives NaN, which callers map to a zero weight."""
    near = gap * (EXPM1_S0 + gap * (EXPM1_S1 + gap * (EXPM1_S2 + gap * EXPM1_S3)))
    return tl.where(gap > -0.125, near, 1.0 - tl.exp2(gap))
