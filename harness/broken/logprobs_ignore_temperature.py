"""Invented (relation: logprob value, issue 33): the logprobs of sampled rows are the raw
``log_softmax(logits)``, not the temperature-scaled ones the contract names (the "raw vs processed
logprobs" confusion of serving engines); greedy rows, tokens and decisions are right. No layer that
predates ``law_consequences`` reads a logprob's value without coupling. Expected catcher:
``law_consequences``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class LogprobsIgnoreTemperature(TorchEagerKernel):
    name = "broken.logprobs_ignore_temperature"

    def logprob_rows(self, pb):
        return torch.log_softmax(pb.logits, dim=-1)


kernel = LogprobsIgnoreTemperature()
