"""BUGS.md class 5 / SPEC.md section 2 trap (vllm-ascend#11985 review): block verification stops at
the first ``eta_i > h_i`` instead of taking the LAST slot that passes. Expected catchers:
``law_consequences``, ``conditional_law`` (block)."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class BlockBreaksAtFirstFailure(TorchEagerKernel):
    name = "broken.block_breaks_at_first_failure"

    def block_tau(self, pb, h, eta):
        passes = (eta <= h[:, 1:]) & pb.draft_valid
        return torch.cumprod(passes.long(), dim=1).sum(dim=1)


kernel = BlockBreaksAtFirstFailure()
