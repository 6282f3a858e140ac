"""Small deliberately wrong variants of the reference kernel, one defect each, for the property tests.

Each proves that one check of layers 1, 2, 3 or 5 can fail (the catalogue of realistic broken kernels
lives elsewhere, in harness/broken*). They wrap ``harness.adapters.reference_kernel.ReferenceKernel``
through three hooks: the batch it sees, the uniforms it uses, the output it returns.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from harness.adapters.reference_kernel import ReferenceKernel
from harness.contract import Capabilities, VerifyBatch, VerifyOutput
from harness.judging.oracle import reference_draws, run_reference
from harness.wellformed import check_well_formed


def _room_after(t: torch.Tensor, elements: int) -> bool:
    """Whether ``t``'s storage extends ``elements`` past its end (only then is the bug simulated)."""
    end = t.storage_offset() + t.numel() + elements
    return t.is_contiguous() and t.untyped_storage().nbytes() >= end * t.element_size()


class Variant(ReferenceKernel):
    """The reference kernel with overridable hooks."""

    name = "variant"

    def see(self, batch: VerifyBatch) -> VerifyBatch:
        return batch

    def draws(self, batch: VerifyBatch, accept: np.ndarray, sample: np.ndarray):
        return accept, sample

    def emit(self, batch: VerifyBatch, out: VerifyOutput) -> VerifyOutput:
        return out

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        seen = self.see(batch)
        check_well_formed(seen)
        accept, sample = self.draws(seen, *reference_draws(seen))
        res = run_reference(seen, accept, sample)
        out = VerifyOutput(
            torch.from_numpy(res.output_token_ids).to(batch.device),
            torch.from_numpy(res.num_emitted).to(batch.device),
            None if res.logprobs is None else torch.from_numpy(res.logprobs).float().to(batch.device),
        )
        return self.emit(batch, out)


class PaddingZero(Variant):
    name = "padding-zero"

    def emit(self, batch, out):
        ids = out.output_token_ids.clone()
        ids[ids == -1] = 0
        return replace(out, output_token_ids=ids)


class EmitsVocabSize(Variant):
    """Emits id V instead of the last token whenever nothing was accepted (BUGS.md #9)."""

    name = "emits-V"

    def emit(self, batch, out):
        ids = out.output_token_ids.clone()
        ids[out.num_emitted == 1, 0] = batch.vocab_size
        return replace(out, output_token_ids=ids)


class WrongWidth(Variant):
    name = "wrong-width"

    def emit(self, batch, out):
        pad = torch.full((batch.num_reqs, 1), -1, dtype=torch.int64, device=batch.device)
        return replace(out, output_token_ids=torch.cat([out.output_token_ids, pad], dim=1))


class ScalesLogitsInPlace(Variant):
    """Divides the caller's target logits by two in place (an input-mutation bug)."""

    name = "mutates-input"

    def see(self, batch):
        batch.target_logits.mul_(0.5)
        return batch


class Nondeterministic(Variant):
    name = "nondeterministic"
    calls = 0

    def see(self, batch):
        Nondeterministic.calls += 1
        return replace(batch, seeds=batch.seeds + Nondeterministic.calls)


class ReadsPastEnd(Variant):
    """Adds the row after the last target row to the last row (an off-by-one read past the end)."""

    name = "reads-past-end"

    def see(self, batch):
        t = batch.target_logits
        if not _room_after(t, t.shape[1]):
            return batch
        beyond = t.as_strided((1, t.shape[1]), t.stride(), t.storage_offset() + t.shape[0] * t.stride(0))
        if bool(torch.isfinite(beyond).all()) and beyond.abs().max() > 1e3:  # only the poison shows
            t = t.clone()
            t[-1] = beyond[0]
        return replace(batch, target_logits=t)


class WritesPastEnd(Variant):
    """Writes one element past the end of ``draft_token_ids`` (an out-of-bounds store)."""

    name = "writes-past-end"

    def see(self, batch):
        ids = batch.draft_token_ids
        if not _room_after(ids, 1):
            return batch
        ids.as_strided((1,), (1,), ids.storage_offset() + ids.numel()).fill_(0)
        return batch


class EmitsZeroProbability(Variant):
    """Emits the first -inf token of a sampled row's target instead of the residual sample (#8/#10)."""

    name = "emits-zero-probability"

    def emit(self, batch, out):
        ids = out.output_token_ids.clone()
        cu = batch.cu_num_draft_tokens.tolist()
        for r, n in enumerate(out.num_emitted.tolist()):
            row = batch.target_logits[cu[r] + r + n - 1]
            dead = torch.nonzero(torch.isneginf(row.float())).flatten()
            if batch.temperature[r] > 0 and dead.numel():
                ids[r, n - 1] = int(dead[0])
        return replace(out, output_token_ids=ids)


class LeavesPaddingUnwritten(Variant):
    """``verify_into`` writes only the emitted slots, leaving the caller's buffer content as padding."""

    name = "unwritten-padding"

    def verify_into(self, batch, out):
        result = self.verify(batch)
        mask = result.output_token_ids != -1
        out.output_token_ids[mask] = result.output_token_ids[mask]
        out.num_emitted.copy_(result.num_emitted)
        if out.logprobs is not None and result.logprobs is not None:
            out.logprobs.copy_(result.logprobs)


class RaisesOnLargeVocab(Variant):
    name = "raises"

    def see(self, batch):
        if batch.vocab_size > 50:
            raise RuntimeError("simulated launch failure")
        return batch


class HidesItsUniforms(Variant):
    """Uses half of the uniforms it reports through ``random_draws``."""

    name = "hides-uniforms"

    def draws(self, batch, accept, sample):
        return accept * np.float32(0.5), sample


class ZeroUniforms(Variant):
    """``random_draws`` (and the kernel) can produce u == 0 (tl.rand's mapping, BUGS.md #8)."""

    name = "zero-uniforms"

    def random_draws(self, batch):
        accept, sample = super().random_draws(batch)
        return torch.zeros_like(accept), sample


class TokenRuleForBlock(Variant):
    """Block verification decided with the token rule (a wrong rule, invisible to structure)."""

    name = "token-rule-for-block"

    def see(self, batch):
        return replace(batch, method="token")


class BatchIndexedSeeds(Variant):
    """Randomness keyed by batch index (seed + r): breaks batch invariance (#17)."""

    name = "batch-indexed-seeds"

    def see(self, batch):
        return replace(batch, seeds=batch.seeds + torch.arange(batch.num_reqs, device=batch.device))


class ChunkKeyedSeeds(Variant):
    """Randomness depends on whether the batch was chunked (#17)."""

    name = "chunk-keyed-seeds"

    def see(self, batch):
        return batch if batch.max_chunk_bytes is None else replace(batch, seeds=batch.seeds ^ 1)


class SaturatingExp(Variant):
    """Logits clamped at +-2000 (as an ``exp`` without max subtraction saturates): shift-dependent."""

    name = "saturating-exp"

    def see(self, batch):
        clamp = lambda t: None if t is None else torch.clamp(t, -2000.0, 2000.0)
        return replace(
            batch, target_logits=clamp(batch.target_logits), draft_logits=clamp(batch.draft_logits)
        )


class BlockSquaresEta(Variant):
    """Block verification uses eta**2: differs from token even at g == 1."""

    name = "block-squares-eta"

    def draws(self, batch, accept, sample):
        return (accept * accept if batch.method == "block" else accept), sample


class PointMassAsUniformDraft(Variant):
    """Point-mass drafts treated as uniform draft distributions."""

    name = "point-mass-as-uniform"

    def see(self, batch):
        if batch.draft_logits is not None:
            return batch
        zeros = torch.zeros(batch.num_draft_total, batch.vocab_size, dtype=batch.target_logits.dtype)
        return replace(batch, draft_logits=zeros)


class GreedySampled(Variant):
    """Greedy rows sampled at T = 1 (the greedy sentinel leaking into sampling, #13)."""

    name = "greedy-sampled"

    def see(self, batch):
        return replace(batch, temperature=torch.where(batch.temperature == 0, 1.0, batch.temperature))


class TemperatureOnTargetOnly(Variant):
    """T applied to the target logits only; the draft stays at T = 1."""

    name = "temperature-on-target-only"

    def see(self, batch):
        if batch.draft_logits is None:
            return batch
        temps = batch.temperature.double()
        per_row = torch.repeat_interleave(
            torch.where(temps > 0, temps, 1.0), torch.tensor(batch.draft_lengths())
        )
        return replace(
            batch, draft_logits=(batch.draft_logits.double() * per_row[:, None]).to(batch.draft_logits.dtype)
        )


class Lenient(Variant):
    """Claims to validate but clamps out-of-range draft ids and carries on."""

    name = "lenient"

    def verify(self, batch):
        ids = batch.draft_token_ids
        if ids.dim() == 1 and ids.numel():
            batch = replace(batch, draft_token_ids=ids.clamp(0, batch.vocab_size - 1))
        return super().verify(batch)


class ChecksOncePerLayout(Variant):
    """Validates the first batch of each layout and trusts later ones (the bug class of a per-layout
    call-plan cache whose key misses a check): refuses nothing it has seen the shapes of."""

    name = "checks-once-per-layout"

    def verify(self, batch):
        seen = self.__dict__.setdefault("layouts", set())
        layout = tuple((tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else t
                       for t in (batch.target_logits, batch.draft_logits, batch.draft_token_ids,
                                 batch.cu_num_draft_tokens, batch.temperature, batch.method))
        if layout not in seen:
            out = super().verify(batch)
            seen.add(layout)
            return out
        n = batch.num_reqs  # "the plan": trusted metadata and values, an output of the cached width
        width = int(batch.draft_token_ids.numel()) + 1
        ids = torch.zeros((n, width), dtype=torch.int64)
        ids[:, 1:] = -1
        return VerifyOutput(ids, torch.ones(n, dtype=torch.int32), None)


class IndexErrorOnBadInput(Variant):
    name = "index-error"

    def verify(self, batch):
        try:
            return super().verify(batch)
        except ValueError as exc:
            raise IndexError(str(exc)) from None


class NanRowEmitsVocabSize(Variant):
    """A NaN target row turns into id V (BUGS.md #9); no validation."""

    name = "nan-row-emits-V"
    capabilities = replace(ReferenceKernel.capabilities, raises_on_bad_input=False)

    def emit(self, batch, out):
        bad = torch.isnan(batch.target_logits.float()).any(dim=1)
        if bool(bad.any()):
            ids = out.output_token_ids.clone()
            ids[torch.arange(batch.num_reqs), out.num_emitted.long() - 1] = batch.vocab_size
            return replace(out, output_token_ids=ids)
        return out


class NoDraws(ReferenceKernel):
    """The reference without ``random_draws``: coupled checks are not claimed."""

    name = "no-draws"
    random_draws = None


class TokenOnly(ReferenceKernel):
    name = "token-only"
    methods = frozenset({"token"})
    capabilities = Capabilities(chunking=False, point_mass_drafts=False)


class AlwaysFails(Variant):
    """Raises on every call, like a kernel that hit an illegal address (see test_cli's device test)."""

    name = "always-fails"

    def see(self, batch):
        raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")


# Module-level instances so that the CLI can name them as tests.harness.sabotage:<name>.
padding_zero = PaddingZero()
always_fails = AlwaysFails()


class StaleLayoutLengths(Variant):
    """Keeps the first ``cu_num_draft_tokens`` it saw per layout (shapes), as a CUDA graph captured
    with its draft lengths would, and verifies later calls of that layout with it."""

    name = "stale-layout-lengths"
    field = "cu_num_draft_tokens"

    def __init__(self):
        super().__init__()
        self.captured: dict = {}

    def see(self, batch):
        key = (tuple(batch.target_logits.shape), None if batch.draft_logits is None
               else tuple(batch.draft_logits.shape), batch.num_reqs)
        kept = self.captured.setdefault(key, getattr(batch, self.field).clone())
        return replace(batch, **{self.field: kept})


class StaleLayoutSeeds(StaleLayoutLengths):
    """Keeps the first seeds it saw per layout (a graph that captured them by value): outputs keep
    their shapes, only the randomness is stale."""

    name = "stale-layout-seeds"
    field = "seeds"
