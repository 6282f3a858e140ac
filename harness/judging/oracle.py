"""The bridge from torch batches to the float64 NumPy oracle (``reference/``).

``reference_draws`` gives the uniforms our randomness layout prescribes (docs/interfaces.md section 1);
``run_reference`` replays a batch decision by decision with whatever uniforms it is handed (the
kernel's own, from ``random_draws``, for coupled checks).
"""

from __future__ import annotations

import numpy as np
import torch

from harness.contract import VerifyBatch
from reference import rng as reference_rng
from reference.verify import ReferenceResult, verify_batch


def to_numpy(t: torch.Tensor | None) -> np.ndarray | None:
    """A CPU NumPy copy; half-precision logits are widened to float32 (exact)."""
    if t is None:
        return None
    t = t.detach().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.numpy()


def reference_draws(batch: VerifyBatch) -> tuple[np.ndarray, np.ndarray]:
    """``(accept_uniforms [num_draft_total], sampling_uniforms [num_logits, V])`` as float32."""
    seeds, positions = to_numpy(batch.seeds), to_numpy(batch.positions)
    cu = to_numpy(batch.cu_num_draft_tokens)
    accept = reference_rng.accept_uniforms(seeds, positions, cu)
    sample = reference_rng.sampling_uniforms(seeds, positions, cu, batch.vocab_size)
    return accept.astype(np.float32), sample.astype(np.float32)


def run_reference(batch: VerifyBatch, accept_uniforms, sampling_uniforms) -> ReferenceResult:
    """The oracle's decisions for ``batch`` under the given uniforms (numpy or torch)."""
    as_np = lambda x: to_numpy(x) if isinstance(x, torch.Tensor) else np.asarray(x)
    return verify_batch(
        to_numpy(batch.target_logits),
        to_numpy(batch.draft_logits),
        to_numpy(batch.draft_token_ids),
        to_numpy(batch.cu_num_draft_tokens),
        to_numpy(batch.temperature),
        as_np(accept_uniforms),
        as_np(sampling_uniforms),
        batch.method,
        want_logprobs=batch.want_logprobs,
    )
