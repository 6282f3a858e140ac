"""BUGS.md class 20: the acceptance uniform is a constant (0.5) instead of a fresh draw per slot, so
acceptance is deterministic given the draft. Expected catcher: ``conditional_law``."""

from harness.implementations.torch_eager import TorchEagerKernel


class ConstantAcceptUniform(TorchEagerKernel):
    name = "broken.constant_accept_uniform"

    def uniforms(self, batch, k_max, vocab):
        accept, sample = super().uniforms(batch, k_max, vocab)
        return accept.fill_(0.5), sample


kernel = ConstantAcceptUniform()
