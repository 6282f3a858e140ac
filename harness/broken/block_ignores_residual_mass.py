"""Invented (block verification): the stop probability uses ``h_i = p_i`` at every slot, ignoring the
residual mass ``Z_{i+1}`` of SPEC.md section 2. Expected catcher: ``conditional_law`` (block)."""

from harness.implementations.torch_eager import TorchEagerKernel


class BlockIgnoresResidualMass(TorchEagerKernel):
    name = "broken.block_ignores_residual_mass"

    def block_stop_probabilities(self, pb, p):
        return p.clone()


kernel = BlockIgnoresResidualMass()
