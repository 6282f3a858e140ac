"""BUGS.md class 12 (lattice#280, vllm-metal#524): greedy argmax ties go to the LAST maximal index
instead of the lowest. Expected catchers:
``law_consequences``, ``conditional_law`` (``greedy_ties`` request: certain
failure), ``structural``/greedy identities on tie families."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class GreedyLastIndexTie(TorchEagerKernel):
    name = "broken.greedy_last_index_tie"

    def greedy_ids(self, logits):
        flipped = torch.nan_to_num(logits, nan=-torch.inf).flip(-1)
        return logits.shape[-1] - 1 - torch.argmax(flipped, dim=-1)


kernel = GreedyLastIndexTie()
