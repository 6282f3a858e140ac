"""The float64 oracle (``reference.verify``) wrapped as a kernel under test.

It runs on CPU with NumPy whatever device the batch is on (results are moved back to that device),
uses the randomness layout of docs/interfaces.md section 1 (so it exposes ``random_draws``), honours
every capability trivially (it never chunks, so its results cannot depend on a chunk budget) and
validates its input with ``harness.wellformed``. Useful as a known-good kernel while developing the
harness, and as the base of deliberately broken variants.
"""

from __future__ import annotations

import torch

from harness.contract import LOGIT_DTYPES, Capabilities, VerifyBatch, VerifyOutput
from harness.judging.oracle import reference_draws, run_reference
from harness.wellformed import check_well_formed


class ReferenceKernel:
    name = "reference"
    methods = frozenset({"token", "block"})
    capabilities = Capabilities(
        point_mass_drafts=True,
        greedy=True,
        logprobs=True,
        chunking=True,
        dtypes=frozenset(LOGIT_DTYPES),
        raises_on_bad_input=True,
        output_buffers=True,
    )

    def random_draws(self, batch: VerifyBatch) -> tuple[torch.Tensor, torch.Tensor]:
        accept, sample = reference_draws(batch)
        return torch.from_numpy(accept).to(batch.device), torch.from_numpy(sample).to(batch.device)

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        check_well_formed(batch)
        accept, sample = reference_draws(batch)
        result = run_reference(batch, accept, sample)
        dev = batch.device
        logprobs = None
        if batch.want_logprobs:
            logprobs = torch.from_numpy(result.logprobs).to(dtype=torch.float32, device=dev)
        return VerifyOutput(
            output_token_ids=torch.from_numpy(result.output_token_ids).to(device=dev, dtype=torch.int64),
            num_emitted=torch.from_numpy(result.num_emitted).to(device=dev, dtype=torch.int32),
            logprobs=logprobs,
        )

    def verify_into(self, batch: VerifyBatch, out: VerifyOutput) -> None:
        """Write the result into caller-provided tensors (which may be views of larger buffers)."""
        result = self.verify(batch)
        out.output_token_ids.copy_(result.output_token_ids)
        out.num_emitted.copy_(result.num_emitted)
        if out.logprobs is not None and result.logprobs is not None:
            out.logprobs.copy_(result.logprobs)


kernel = ReferenceKernel()
