"""BUGS.md class 20: verification is effectively off: every draft token is accepted (token and block),
then the bonus is sampled. Expected catchers: ``conditional_law``, ``expected_accepted``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class AcceptAll(TorchEagerKernel):
    name = "broken.accept_all"

    def token_accepts(self, u, q_x, b_x):
        return torch.ones_like(u, dtype=torch.bool)

    def block_tau(self, pb, h, eta):
        return pb.lengths.clone()


kernel = AcceptAll()
