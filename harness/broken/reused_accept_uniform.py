"""BUGS.md class 1 (flashinfer#424, vllm#54282): the acceptance uniform of the rejected slot is reused
to sample the correction token (inverse CDF of the residual). Given a rejection that uniform is no
longer uniform (``u >= b/q``), so ``Y | tau`` is biased. Expected catcher: ``conditional_law``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class ReusedAcceptUniform(TorchEagerKernel):
    name = "broken.reused_accept_uniform"

    def final_token(self, pb, weights, u_row, tau, u_accept):
        fresh = super().final_token(pb, weights, u_row, tau, u_accept)
        if pb.k_max == 0:
            return fresh
        u = u_accept[pb.rows, tau.clamp(max=pb.k_max - 1)]
        cdf = torch.cumsum(weights, dim=-1)
        reused = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None])[:, 0].clamp(max=pb.vocab - 1)
        return torch.where(tau < pb.lengths, reused, fresh)


kernel = ReusedAcceptUniform()
