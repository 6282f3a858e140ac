"""BUGS.md class 8 (sglang#35771, vllm#23803): acceptance uniforms on a coarse grid that includes 0
(``floor(256 u) / 256``) and an inclusive compare ``u * q <= b``: a draft the target gives probability
exactly 0 is accepted whenever ``u == 0`` (1 in 256). Expected catcher: ``conditional_law`` (a cell of
probability 0 observed: certain failure); ``structural``'s support check when its cases hit it."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class InclusiveCompareCoarseUniform(TorchEagerKernel):
    name = "broken.inclusive_compare_coarse_uniform"

    def uniforms(self, batch, k_max, vocab):
        accept, sample = super().uniforms(batch, k_max, vocab)
        return torch.floor(accept * 256) / 256, sample

    def token_accepts(self, u, q_x, b_x):
        return u * q_x <= b_x


kernel = InclusiveCompareCoarseUniform()
