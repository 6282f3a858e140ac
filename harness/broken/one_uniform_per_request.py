"""Invented (randomness not keyed by position): one acceptance uniform per request, reused at every
draft slot, so acceptance decisions at different positions are perfectly correlated. Each slot alone
looks right; ``P(tau >= 2)`` becomes ``min(a_1, a_2)`` instead of ``a_1 a_2``. Expected catcher:
``conditional_law``."""

from harness.implementations.torch_eager import TorchEagerKernel


class OneUniformPerRequest(TorchEagerKernel):
    name = "broken.one_uniform_per_request"

    def uniforms(self, batch, k_max, vocab):
        accept, sample = super().uniforms(batch, k_max, vocab)
        if k_max:
            accept[:] = accept[:, :1].clone()
        return accept, sample


kernel = OneUniformPerRequest()
