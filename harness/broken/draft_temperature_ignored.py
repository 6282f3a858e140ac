"""BUGS.md class 19 (transformers#32867, #47932): the draft distribution the verifier uses differs
from the one the drafts were sampled from: here the draft logits are not divided by the temperature.
Invisible at T = 1. Expected catchers:
``law_consequences``, ``conditional_law`` (T = 0.8), ``marginal_law``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class DraftTemperatureIgnored(TorchEagerKernel):
    name = "broken.draft_temperature_ignored"

    def draft_probabilities(self, logits, temperature):
        return torch.softmax(logits, dim=-1)


kernel = DraftTemperatureIgnored()
