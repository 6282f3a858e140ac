"""BUGS.md class 5's mirror image (relation: block verification keeps every slot up to the last with
``p_i == 1``, issue 33): ``tau = min{i : eta_i <= h_i}``, the FIRST passing slot, instead of the
last; a later slot with ``p_i == 1`` (``h_i = 1``, a sure pass) is dropped. Expected catchers:
``law_consequences``, ``conditional_law``, ``equal_models_accept_all``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class BlockTakesFirstPassingSlot(TorchEagerKernel):
    name = "broken.block_takes_first_passing_slot"

    def block_tau(self, pb, h, eta):
        tau = torch.zeros(pb.num_reqs, dtype=torch.int64)
        for i in range(pb.k_max, 0, -1):
            passes = (eta[:, i - 1] <= h[:, i]) & pb.draft_valid[:, i - 1]
            tau = torch.where(passes, i, tau)
        return tau


kernel = BlockTakesFirstPassingSlot()
