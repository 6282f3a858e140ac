"""Shared helpers for the property tests: a CPU run context and one-call property runs."""

from __future__ import annotations

import torch

from harness.generation.cases import Case
from harness.profiles import PROFILES
from harness.properties import REGISTRY
from harness.properties.base import PropertyResult, RunContext


def cpu_context(seed: int = 0, profile: str = "ci", device: str = "cpu", **extra) -> RunContext:
    return RunContext(
        profile=PROFILES[profile],
        device=torch.device(device),
        seed=seed,
        kernel_spec="tests.harness.sabotage:<variant>",
        extra=dict(extra),
    )


def run_property(name: str, kernel: object, seed: int = 0) -> PropertyResult:
    return REGISTRY[name].run(kernel, cpu_context(seed))


def check_case(name: str, kernel: object, case: Case, device: str = "cpu"):
    """One case of property ``name``; ``device``: where its batch is built (our compiled kernels
    refuse CPU tensors on a GPU machine)."""
    return REGISTRY[name].check_guarded(kernel, case, cpu_context(device=device))


def simple_case(**overrides) -> Case:
    """Three requests, V = 17, ragged drafts, mixed temperatures (one greedy)."""
    fields = dict(
        vocab_size=17,
        draft_lens=[3, 0, 2],
        temperatures=[1.0, 0.0, 0.7],
        seeds=[11, 12, 13],
        positions=[5, 2**32 - 1, 100],
        family="gaussian",
        data_seed=7,
    )
    fields.update(overrides)
    return Case(**fields)
