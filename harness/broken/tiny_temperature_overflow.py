"""BUGS.md class 13 (TensorRT-LLM#19390): probabilities computed as ``exp(logits / T) / sum`` in
float32 without subtracting the maximum: at tiny temperatures (or huge logits) ``exp`` overflows to
``inf`` and the row becomes NaN, after which every decision is garbage (here: reject, emit id 0).
Expected catchers: ``conditional_law`` (``tiny_temperature`` request), ``logit_shift``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


def _overflowing_softmax(logits, temperature):
    e = torch.exp((logits / temperature[:, None, None]).float())
    return (e / e.sum(dim=-1, keepdim=True)).double()


class TinyTemperatureOverflow(TorchEagerKernel):
    name = "broken.tiny_temperature_overflow"

    def target_probabilities(self, logits, temperature):
        return _overflowing_softmax(logits, temperature)

    def draft_probabilities(self, logits, temperature):
        return _overflowing_softmax(logits, temperature)


kernel = TinyTemperatureOverflow()
