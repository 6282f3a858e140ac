"""BUGS.md class 15 (vLLM's exponential-race precision note), exaggerated to show at V = 300: the
race noise ``E = -log(1 - u)`` is computed from ``1 - u`` rounded to bfloat16 (8 significant bits),
so small ``E`` (the winners' tail) is quantised and ``E == 0`` (score ``+inf``) happens with
probability 2^-9 per token regardless of its weight: low-probability tokens win far too often.
Expected catcher: ``first_token_law``
(tail-mass bins)."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class QuantisedExponentialNoise(TorchEagerKernel):
    name = "broken.quantised_exponential_noise"

    def race(self, weights, uniforms):
        exp_noise = -torch.log((1.0 - uniforms).to(torch.bfloat16).double())
        score = torch.where(weights > 0, torch.log(weights) - torch.log(exp_noise), -torch.inf)
        ids = torch.argmax(score, dim=-1)
        return torch.where(score.max(dim=-1).values > -torch.inf, ids, -1)


kernel = QuantisedExponentialNoise()
