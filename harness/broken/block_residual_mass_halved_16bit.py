"""Invented (block verification), after a mutant of our own pass 2 that every float32 case missed:
the residual mass ``Z_{i+1}`` is halved when the logits are bfloat16 or float16, so
``h_i = Z / (Z + 1 - p_i)`` is too small and the block stops inside its draft too rarely. Correct in
float32. Expected catcher: ``conditional_law`` (its 16-bit copies of the block-trap request)."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class BlockResidualMassHalved16Bit(TorchEagerKernel):
    name = "broken.block_residual_mass_halved_16bit"

    def residual_masses(self, pb, p):
        z = super().residual_masses(pb, p)
        return z * 0.5 if pb.logit_dtype in (torch.bfloat16, torch.float16) else z


kernel = BlockResidualMassHalved16Bit()
