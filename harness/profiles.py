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
    # After a property's first failing case, how much more it may spend shrinking it (Hypothesis's
    # own limit is 500 shrinks / 300 s, far too much for the CPU interpreter).
    shrink_calls: int = 200
    shrink_seconds: float = 120.0
    # Cap on num_logits * V of one drawn batch: the host builds it in float64 and the oracle replays
    # it, so a 256-request batch at V = 262144 must not be drawn whole.
    max_logit_elements: int = 1 << 21
    # Supervised kernel calls (harness/execution/supervisor.py): a call that has not returned after this many
    # seconds is a ``hang`` finding (``--time-limit`` on the command line overrides it). While the call
    # compiles Triton kernels (a GPU; never the CPU interpreter) the compile limit runs instead.
    call_time_limit_s: float = 120.0
    compile_time_limit_s: float = 600.0
    # Vocabulary sizes come from these power-of-two rungs (harness/generation/vocab_ladder.py), so that a run
    # compiles few Triton specialisations; None: any size 1..max_vocab (nightly campaigns).
    vocab_rungs: tuple[int, ...] | None = None
    # Case properties draw their cases from a palette of shapes per run (harness/generation/shape_palette.py),
    # so that the properties of a run share their compiled specialisations.
    shape_palette: bool = False


# Rungs per profile (harness/generation/vocab_ladder.py says what each one stands for).
CI_RUNGS = (1, 8, 16, 256, 512)  # (256, 300]: two 256-wide blocks under the interpreter
DEV_RUNGS = (1, 8, 16, 256, 1024, 8192)
GPU_RUNGS = (1, 8, 16, 1024, 8192, 16384, 262144)


PROFILES: dict[str, Profile] = {
    "ci": Profile(
        "ci",
        12,
        True,
        300,
        4,
        4,
        0.05,
        400_000,
        1e-6,
        shrink_calls=300,
        shrink_seconds=15.0,
        max_logit_elements=1 << 14,
        vocab_rungs=CI_RUNGS,
        shape_palette=True,
    ),
    "dev": Profile(
        "dev",
        40,
        False,
        5000,
        8,
        8,
        0.03,
        2_000_000,
        1e-6,
        shrink_calls=500,
        shrink_seconds=60.0,
        max_logit_elements=1 << 20,
        vocab_rungs=DEV_RUNGS,
        shape_palette=True,
    ),
    "gpu": Profile("gpu", 60, False, 262_144, 256, 16, 0.01, 50_000_000, 1e-6, vocab_rungs=GPU_RUNGS,
                   shape_palette=True),
    "nightly": Profile(
        "nightly", 500, False, 262_144, 512, 16, 0.005, 200_000_000, 1e-6, max_logit_elements=1 << 23
    ),
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
        phases = (
            tuple(Phase) if p.name != "ci" else (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)
        )
        settings.register_profile(
            p.name, max_examples=p.max_examples, derandomize=p.derandomize, phases=phases, **common
        )


def active_profile_name() -> str:
    """``SPECFUZZ_PROFILE`` if set, else ``gpu`` with a CUDA device (unless ``CI`` is set), else ``ci``.

    ``dev`` and ``nightly`` are opt-in: on the CPU interpreter they take far longer than ``ci``."""
    explicit = os.environ.get("SPECFUZZ_PROFILE")
    if explicit:
        return explicit
    if os.environ.get("CI"):
        return "ci"
    import torch

    return "gpu" if torch.cuda.is_available() else "ci"
