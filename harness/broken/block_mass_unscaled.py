"""Invented, SPEC.md section 2 (relation: block verification never stops where ``h_i = 0``, issue
33): the residual mass in ``h_i`` is ``Z_{i+1} = sum (b_{i+1} - q_{i+1})_+``, without the factor
``p_i``; where ``p_i b_{i+1} <= q_{i+1}`` everywhere the true ``h_i`` is 0, but this kernel stops there
(and its block residual is empty, so it falls back to the target row). Expected catchers:
``law_consequences``, ``conditional_law``."""

from harness.implementations.torch_eager import TorchEagerKernel


class BlockMassUnscaled(TorchEagerKernel):
    name = "broken.block_mass_unscaled"

    def residual_masses(self, pb, p):
        return (pb.target[:, : pb.k_max] - pb.draft).clamp(min=0.0).sum(-1)


kernel = BlockMassUnscaled()
