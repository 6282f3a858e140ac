"""A kernel wrapper that computes the same decisions from shifted logits: equivalent, not bit-identical.

``ShiftedLogits(inner, shift)`` hands ``inner`` a batch whose sampled requests' target and draft rows
are float32 copies with ``shift`` added (softmax is invariant to a per-row constant, SPEC.md 5.7);
greedy requests' rows are passed unchanged (their argmax must be of the given logits, and a float32
sum could merge two distinct maxima into a tie). Every probability then differs from ``inner``'s by
float32 rounding only, so a pre-merge diff (``python -m harness diff``) must find at most near-tie
flips and rounding-level logprob changes, all legal. ``random_draws`` is ``inner``'s (the uniforms
do not depend on the logits).

``kernel`` wraps our Triton kernels with ``shift = 16``: float32 then rounds a shifted logit near 16
to a multiple of 2^-19 (a shift of 0.375 left all 35 ci cases bit-identical: its rounding stayed
below the outputs' float32 resolution). ``reference`` wraps the float64 oracle.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from harness.contract import VerifyBatch, VerifyOutput, capabilities_of


class ShiftedLogits:
    def __init__(self, inner: object, shift: float = 16.0):
        self.inner, self.shift = inner, shift
        self.name = f"{inner.name}+shift{shift:g}"
        self.methods = inner.methods
        self.capabilities = capabilities_of(inner)
        if callable(getattr(inner, "random_draws", None)):
            self.random_draws = inner.random_draws

    def shifted(self, batch: VerifyBatch) -> VerifyBatch:
        """The batch the inner kernel sees (module docstring)."""
        lengths = torch.tensor(batch.draft_lengths(), dtype=torch.int64)
        sampled = (batch.temperature.cpu() > 0).to(torch.float32)
        target_rows = torch.repeat_interleave(sampled, lengths + 1).to(batch.device)[:, None]
        draft_rows = torch.repeat_interleave(sampled, lengths).to(batch.device)[:, None]
        target = batch.target_logits.float() + self.shift * target_rows
        draft = None if batch.draft_logits is None else batch.draft_logits.float() + self.shift * draft_rows
        return replace(batch, target_logits=target, draft_logits=draft)

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        return self.inner.verify(self.shifted(batch))


def _triton() -> ShiftedLogits:
    from harness.adapters.triton_kernels import kernel as triton_kernel

    return ShiftedLogits(triton_kernel)


def reference() -> ShiftedLogits:
    from harness.adapters.reference_kernel import kernel as reference_kernel

    return ShiftedLogits(reference_kernel)


kernel = _triton
