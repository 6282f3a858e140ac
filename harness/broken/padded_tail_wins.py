"""BUGS.md class 10 (vllm GHSA-8wr5-jm2h-8r4f): the vocabulary is padded to a multiple of 64 with
logit ``0.0`` instead of ``-inf``, so padded ids ``>= V`` take part in sampling and in the greedy
argmax (they win outright when every real logit is negative). Invisible when ``V % 64 == 0``.
Expected catchers: ``structural`` (id range), ``conditional_law`` (contract-violation cell)."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel

BLOCK = 64


class PaddedTailWins(TorchEagerKernel):
    name = "broken.padded_tail_wins"

    def final_token(self, pb, weights, u_row, tau, u_accept):
        pad = (-pb.vocab) % BLOCK
        if pad == 0:
            return super().final_token(pb, weights, u_row, tau, u_accept)
        logits = pb.logits[pb.rows, tau] / pb.temperature[:, None]
        top = torch.nan_to_num(logits, nan=0.0).max(dim=-1, keepdim=True).values
        mass = torch.exp(logits - top).nansum(dim=-1, keepdim=True)
        pad_weight = (torch.exp(-top) / mass).expand(-1, pad)  # a logit of 0.0, on the row's scale
        u_pad = u_row.repeat(1, pad // pb.vocab + 1)[:, :pad].flip(-1)
        ids = self.race(torch.cat([weights, pad_weight], dim=-1), torch.cat([u_row, u_pad], dim=-1))
        return torch.where(ids >= 0, ids, 0)

    def greedy_ids(self, logits):
        pad = (-logits.shape[-1]) % BLOCK
        padded = torch.cat([logits, logits.new_zeros(*logits.shape[:-1], pad)], dim=-1)
        return torch.argmax(torch.nan_to_num(padded, nan=-torch.inf), dim=-1)


kernel = PaddedTailWins()
