"""Invented: the temperature is applied twice (``logits / T^2``) to target and draft rows alike, as
when a caller pre-scales logits and the kernel scales again. Expected catcher: ``conditional_law``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


def _twice(logits, temperature):
    return torch.softmax(logits / (temperature**2)[:, None, None], dim=-1)


class TemperatureAppliedTwice(TorchEagerKernel):
    name = "broken.temperature_applied_twice"

    def target_probabilities(self, logits, temperature):
        return _twice(logits, temperature)

    def draft_probabilities(self, logits, temperature):
        return _twice(logits, temperature)


kernel = TemperatureAppliedTwice()
