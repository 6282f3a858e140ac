"""The tolerance table: how far a correct kernel's float outputs may lie from the float64 oracle.

One row per logit dtype of the contract. A row names the arithmetic a correct kernel may use for rows
of that dtype and the tolerance that follows from it; ``logprob_tolerance`` applies it to one
emitted token. Every judgement by value of an output that the emitted ids fix
(harness/judging/consequences.py)
takes its tolerance from here, and a failure reports the row it used.

Why the rows are what they are:
- The contract's logprobs are float32, so the arithmetic allowed is float32 (unit roundoff
  ``u = 2^-24``) for every logit dtype. bfloat16 and float16 logits widen to float32 exactly;
  a kernel that keeps probabilities in 16 bits is BUGS.md class 14, which this check is meant to
  see, so the 16-bit rows are not looser.
- A log-probability is ``z_v - log sum_w exp(z_w)`` with ``z = logits / T``. Forming ``z`` (a division,
  perhaps a subtraction of the row maximum) errs by a few ``u * S``, where ``S`` is the largest finite
  ``|logit| / T`` of the row (what feeds ``exp``); every ``exp(z_w)`` then errs relatively by as much,
  and so does their sum and its log. The result is rounded to float32 (``u * |lp|``). Hence
  ``rtol * (S + |lp|)`` with ``rtol = 16 u``: 16 such roundings, a margin of 4 over the 3-4 a
  straightforward evaluation makes (GPU ``exp2``/``log2`` approximations err by ~2 ulp more).
- ``atol = 1e-4`` nats covers the normaliser's summation: a float32 sum of ``V`` positive terms errs by
  about ``sqrt(V) u`` relative when the rounding errors are independent (``3e-5`` at ``V = 262144``),
  ``log2(V) u`` for a pairwise or blocked sum (``1e-6``). It equals the floor the coupled comparison
  has used since the first GPU runs (harness/judging/decision_compare.py), where no correct kernel has come
  near it.
- Bugs this is meant to see move a logprob by far more: the wrong row or temperature, raw logits for
  a sampled row, the draft instead of the correction, 16-bit arithmetic (``2^-8 S``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Tolerance:
    """``|kernel - oracle| <= atol + rtol * (S + |oracle|)``, with the arithmetic it assumes."""

    arithmetic: str
    atol: float
    rtol: float

    def bound(self, scale: float, oracle: float) -> float:
        return self.atol + self.rtol * (scale + abs(oracle))

    def describe(self) -> dict:
        return {"arithmetic": self.arithmetic, "atol": self.atol, "rtol": self.rtol,
                "formula": "atol + rtol * (S + |oracle|), S = max finite |logit| / T of the row"}


_FLOAT32_ARITHMETIC = Tolerance("float32", atol=1e-4, rtol=16 * 2.0**-24)

# The one table: logit dtype -> tolerance of the float32 logprobs computed from such rows.
LOGPROB_TOLERANCE: dict[torch.dtype, Tolerance] = {
    torch.float32: _FLOAT32_ARITHMETIC,
    torch.bfloat16: _FLOAT32_ARITHMETIC,
    torch.float16: _FLOAT32_ARITHMETIC,
}


def logprob_tolerance(dtype: torch.dtype) -> Tolerance:
    """The row of ``LOGPROB_TOLERANCE`` for ``dtype`` (a dtype outside the contract is a harness error)."""
    try:
        return LOGPROB_TOLERANCE[dtype]
    except KeyError as missing:
        known = list(LOGPROB_TOLERANCE)
        raise ValueError(f"no logprob tolerance for logit dtype {dtype}; known: {known}") from missing


def exponent_scale_of_rows(rows: np.ndarray, temperature: float) -> float:
    """``S``: the largest finite ``|logit| / T`` over ``rows`` (``T == 0``: raw logits), 0 if none."""
    values = np.abs(np.asarray(rows, dtype=np.float64))
    values = values[np.isfinite(values)]
    biggest = float(values.max()) if values.size else 0.0
    return biggest / temperature if temperature > 0 else biggest
