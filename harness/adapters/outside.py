"""What the adapters of outside engines' CUDA kernels (FlashInfer, SGLang) share: the installed
distribution's version, and the domain both declare (token verification of chains on CUDA, logits of
any float dtype, no chunking, no logprobs, no input validation) with each engine's differences."""

from __future__ import annotations

import dataclasses

from harness.contract import LOGIT_DTYPES, Capabilities


def distribution_version(name: str) -> str | None:
    """The installed distribution ``name``'s version, or ``None``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


CUDA_CHAIN_VERIFIER = Capabilities(
    point_mass_drafts=True,
    greedy=True,
    logprobs=False,
    chunking=False,
    dtypes=frozenset(LOGIT_DTYPES),
    max_vocab=262_144,
    max_draft_len=16,
    raises_on_bad_input=False,
    devices=frozenset({"cuda"}),
)


def chain_verifier(**differences) -> Capabilities:
    """``CUDA_CHAIN_VERIFIER`` with an engine's ``differences``."""
    return dataclasses.replace(CUDA_CHAIN_VERIFIER, **differences)
