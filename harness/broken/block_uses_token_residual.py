"""BUGS.md class 7 / SPEC.md section 2 trap (vllm-ascend#7807): after a block rejection the token
residual ``(b - q)_+`` is sampled instead of ``(p_tau b - q)_+``. Its joint TV is small in general
(~0.01); the ``block_trap`` request puts mass where only the token residual can emit, a certain
failure. Expected catchers:
``law_consequences``, ``conditional_law`` (block)."""

from harness.implementations.torch_eager import TorchEagerKernel


class BlockUsesTokenResidual(TorchEagerKernel):
    name = "broken.block_uses_token_residual"

    def block_residual(self, pb, p, tau):
        return self.token_residual(pb, tau)


kernel = BlockUsesTokenResidual()
