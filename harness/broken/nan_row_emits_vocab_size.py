"""BUGS.md class 9 (vllm#20531, flashinfer#3470): when a row has no usable probability (NaN or all
``-inf``), the sampler returns the "not found" index ``V`` instead of an id in ``[0, V)``; greedy rows
take ``torch.argmax``'s NaN position. Only degenerate rows trigger it. Expected catchers:
``degenerate_rows_outcome`` (documented outcome for degenerate rows), ``structural`` (id range)."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class NanRowEmitsVocabSize(TorchEagerKernel):
    name = "broken.nan_row_emits_vocab_size"

    def final_token(self, pb, weights, u_row, tau, u_accept):
        sampled = self.race(weights, u_row)
        return torch.where(sampled >= 0, sampled, pb.vocab)

    def greedy_ids(self, logits):
        has_nan = torch.isnan(logits).any(dim=-1)
        return torch.where(has_nan, logits.shape[-1], torch.argmax(logits, dim=-1))


kernel = NanRowEmitsVocabSize()
