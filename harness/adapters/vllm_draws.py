"""vLLM MRV2's own uniforms, computed by vLLM's own Triton functions: ``random_draws`` for its adapter.

MRV2 (``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py``, 0.33.0 and 0.34.0) draws:

- acceptance, in ``_rejection_kernel``: draft ``i`` of a request (its target row ``cu[r] + i``) uses
  ``tl_rand32(seed, pos[cu[r] + i], includes_zero=False)``, where ``seed`` is the request's seed for
  token verification and ``spec_step_seed(seed, i)`` for block verification; token verification
  accepts iff ``log p > log u + log q`` (``u < p / q``), block verification passes iff ``u <= h``;
- resampling, in ``_resample_kernel`` through ``gumbel_block_argmax``: the row ``cu[r] + tau`` races
  ``residual_logits + g`` with ``g = -log(-log1p(-u))`` (``_log1p_neg_stable``) and
  ``u = murmur3_uniform32(seed, pos[row], token_id)``, the request's seed unmixed.

The oracle races ``log w - log E`` with ``E = -log1p(-u)`` (reference/verify.py), the same race on
the same ``u``; so the sampling uniforms are vLLM's ``u`` as they are, except that a ``u`` that rounds
to exactly 1.0 (possible: ``murmur3_uniform32`` rounds ``(x + 0.5) 2^-32`` to float32) is reported as
``1 - 2^-24``, the value vLLM's clamp ``max(1 - u, 2^-24)`` effectively uses. Accept uniforms are
``tl_rand32``'s, already clamped away from 0 by vLLM.

The kernel below calls vLLM's ``tl_rand32``, ``spec_step_seed`` and ``murmur3_uniform32`` (imported
from the installed vLLM, nothing copied), with the keys vLLM uses; what it computes is pinned by the
coupled check (kernel decisions == oracle decisions on these draws) and by the threshold probe in
tests/harness/test_vllm_adapters.py. Import this module only after ``harness.adapters.vllm._import_vllm``.
"""

from __future__ import annotations

import torch

import kernels._device  # noqa: F401  (selects TRITON_INTERPRET before triton is imported)
import triton
import triton.language as tl
from vllm.v1.worker.gpu.sample.gumbel import murmur3_uniform32, spec_step_seed, tl_rand32

FLOAT32_BELOW_ONE = 1.0 - 2.0**-24
_ACCEPT_BLOCK = 128
_SAMPLE_BLOCK = 1024


@triton.jit
def _accept_uniforms_kernel(out_ptr, seed_ptr, pos_ptr, step_ptr, num_drafts,
                            BLOCK_VERIFICATION: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < num_drafts
    seed = tl.load(seed_ptr + offs, mask=mask, other=0)
    pos = tl.load(pos_ptr + offs, mask=mask, other=0)
    if BLOCK_VERIFICATION:
        seed = spec_step_seed(seed, tl.load(step_ptr + offs, mask=mask, other=0))
    tl.store(out_ptr + offs, tl_rand32(seed, pos, includes_zero=False), mask=mask)


@triton.jit
def _sampling_uniforms_kernel(out_ptr, seed_ptr, pos_ptr, vocab_size, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    tokens = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    seed = tl.load(seed_ptr + row)
    pos = tl.load(pos_ptr + row)
    u = murmur3_uniform32(seed, pos, tokens)
    tl.store(out_ptr + row * vocab_size + tokens, u, mask=tokens < vocab_size)


def vllm_uniforms(call) -> tuple[torch.Tensor, torch.Tensor]:
    """``(accept [num_draft_total], sampling [num_logits, V])`` float32 for an ``MRV2Arguments``.

    Depends only on each request's seed and absolute positions, as vLLM's draws do, so it is the same
    whether or not vLLM chunks the batch.
    """
    batch = call.batch
    dev = batch.device
    row_seed = call.seed[call.expanded_slot.to(torch.int64)].contiguous()
    pos = call.pos.contiguous()
    lengths = torch.as_tensor(batch.draft_lengths(), device=dev)
    draft_rows = call.local_pos < torch.repeat_interleave(lengths, lengths + 1)  # rows 0..k_r-1
    accept = torch.empty(batch.num_draft_total, dtype=torch.float32, device=dev)
    if accept.numel():
        steps = call.local_pos[draft_rows].contiguous()
        grid = (triton.cdiv(accept.numel(), _ACCEPT_BLOCK),)
        _accept_uniforms_kernel[grid](
            accept, row_seed[draft_rows].contiguous(), pos[draft_rows].contiguous(), steps, accept.numel(),
            BLOCK_VERIFICATION=batch.method == "block", BLOCK=_ACCEPT_BLOCK,
        )
    vocab = batch.vocab_size
    sample = torch.empty((batch.num_logits, vocab), dtype=torch.float32, device=dev)
    if sample.numel():
        grid = (batch.num_logits, triton.cdiv(vocab, _SAMPLE_BLOCK))
        _sampling_uniforms_kernel[grid](sample, row_seed, pos, vocab, BLOCK=_SAMPLE_BLOCK)
        sample = torch.where(sample >= 1.0, torch.full_like(sample, FLOAT32_BELOW_ONE), sample)
    return accept, sample
