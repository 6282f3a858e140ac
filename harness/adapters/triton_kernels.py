"""Our Triton kernels (``kernels.rejection_sample`` / ``kernels.random_draws``) as a kernel under test.

``kernels.rejection_sample`` always checks shapes, dtypes, ``cu``, draft ids and temperatures on the
host and raises ``ValueError``, so both adapters claim clear errors on malformed input. ``kernel`` is
the production path (``validate=False``): NaN / all ``-inf`` rows get the documented outcome of
docs/interfaces.md section 3. ``kernel_validating`` passes ``validate=True``, which refuses such rows
with ``ValueError`` instead. ``kernels`` is imported lazily, after ``kernels._device`` has chosen
compiled Triton or the CPU interpreter.
"""

from __future__ import annotations

import torch

import kernels._device  # noqa: F401  (selects TRITON_INTERPRET before triton is imported)
from harness.contract import BATCH_TENSOR_FIELDS, LOGIT_DTYPES, Capabilities, VerifyBatch, VerifyOutput


def _batch_args(batch: VerifyBatch) -> tuple:
    """The batch's tensors in the positional order of ``kernels.rejection_sample``."""
    return tuple(getattr(batch, name) for name in BATCH_TENSOR_FIELDS)


class TritonKernels:
    methods = frozenset({"token", "block"})

    def __init__(self, validate: bool = False):
        self.validate = validate
        self.name = "triton-validating" if validate else "triton"
        self.capabilities = Capabilities(
            point_mass_drafts=True,
            greedy=True,
            logprobs=True,
            chunking=True,
            dtypes=frozenset(LOGIT_DTYPES),
            # The contract's 16, not kernels.MAX_DRAFT_TOKENS (127): every longer draft compiles a
            # wider decide tile (2-9 s each on the H200), which on the gpu profile pushed
            # layout_reuse's four cases past 220 s. tests/kernels/test_structure.py tests the
            # 127 / 128 boundary.
            max_draft_len=16,
            raises_on_bad_input=True,
            draft_padding_minus_one=True,  # docs/kernels.md, "Bad input"
            philox_layout=True,  # kernels/randomness.py follows docs/interfaces.md section 1
        )

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        import kernels

        ids, num_emitted, logprobs = kernels.rejection_sample(
            *_batch_args(batch),
            method=batch.method,
            max_chunk_bytes=batch.max_chunk_bytes,
            want_logprobs=batch.want_logprobs,
            validate=self.validate,
        )
        return VerifyOutput(output_token_ids=ids, num_emitted=num_emitted, logprobs=logprobs)

    def random_draws(self, batch: VerifyBatch) -> tuple[torch.Tensor, torch.Tensor]:
        import kernels

        return kernels.random_draws(*_batch_args(batch))


kernel = TritonKernels(validate=False)
kernel_validating = TritonKernels(validate=True)
