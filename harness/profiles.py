"""Named run profiles: how big the fuzz space is and how many examples and samples a run spends.

One profile serves both pytest (``--hypothesis-profile`` / ``SPECFUZZ_PROFILE``) and the CLI
(``python -m harness check --profile``). ``ci`` is derandomized and small enough for the Triton CPU
interpreter on a 2-core machine; ``gpu`` and ``nightly`` assume compiled kernels on a GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, settings


@dataclass(frozen=True)
class Profile:
    name: str
    max_examples: int  # Hypothesis examples per property
    derandomize: bool
    max_vocab: int  # largest V the strategies draw
    max_reqs: int  # largest number of requests in a batch
    max_draft: int  # largest draft length
    stat_tv: float  # total-variation error each statistical assertion must detect with power >= 0.999
    stat_max_samples: int  # cap on samples per statistical assertion
    alpha_family: float  # family-wise false-alarm budget of one run (Holm over its assertions)


PROFILES: dict[str, Profile] = {
    "ci": Profile("ci", 12, True, 300, 4, 4, 0.05, 400_000, 1e-6),
    "dev": Profile("dev", 40, False, 5000, 8, 8, 0.03, 2_000_000, 1e-6),
    "gpu": Profile("gpu", 60, False, 262_144, 256, 16, 0.01, 50_000_000, 1e-6),
    "nightly": Profile("nightly", 500, False, 262_144, 512, 16, 0.005, 200_000_000, 1e-6),
}


def register_hypothesis_profiles() -> None:
    """Register every profile with Hypothesis (``deadline=None``: JIT compiles take seconds).

    Registering ``ci`` replaces Hypothesis's built-in profile of that name, which it auto-loads when
    the ``CI`` environment variable is set.
    """
    common = dict(
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )
    for p in PROFILES.values():
        phases = tuple(Phase) if p.name != "ci" else (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)
        settings.register_profile(
            p.name, max_examples=p.max_examples, derandomize=p.derandomize, phases=phases, **common
        )


def active_profile_name() -> str:
    """``SPECFUZZ_PROFILE`` if set, else ``ci`` under CI, ``gpu`` with a CUDA device, else ``dev``."""
    explicit = os.environ.get("SPECFUZZ_PROFILE")
    if explicit:
        return explicit
    if os.environ.get("CI"):
        return "ci"
    import torch

    return "gpu" if torch.cuda.is_available() else "dev"
