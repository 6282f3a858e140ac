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


def require_cuda_release(found: str | None, distribution: str, supported: tuple[str, ...], adapter: str,
                         hint: str, unavailable: type[Exception], needs_cuda: str) -> str:
    """``found`` (the installed version of ``distribution``) when it is one of ``supported`` and a CUDA
    device is present; otherwise raises ``unavailable`` saying which is missing and how to install."""
    import torch

    if found is None:
        raise unavailable(f"{distribution} is not installed; install it with: {hint}")
    if found not in supported:
        raise unavailable(
            f"{distribution} {found} is installed; {adapter} knows {', '.join(supported)} "
            "(its argument mapping is written for those signatures)"
        )
    if not torch.cuda.is_available():
        raise unavailable(needs_cuda)
    return found


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
