"""Choose between compiled Triton (a CUDA device is present) and Triton's CPU interpreter.

Triton reads ``TRITON_INTERPRET`` when kernels are defined, so this must run before any module that
defines a ``@triton.jit`` function is imported. An explicit ``TRITON_INTERPRET`` set by the user wins.
"""

from __future__ import annotations

import os

import torch


def select_triton_mode() -> bool:
    """Set ``TRITON_INTERPRET=1`` when no CUDA device is available; return True when interpreting."""
    if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


INTERPRETING = select_triton_mode()

import triton.language as tl  # noqa: E402  (only after the mode is chosen)

if INTERPRETING:
    from kernels import interpreter_patching  # noqa: E402

    interpreter_patching.install()

# For ``@triton.jit`` code: branches that use inline PTX or GPU-only features test this constexpr.
COMPILED = tl.constexpr(not INTERPRETING)


def default_device() -> torch.device:
    """The device tensors for our kernels live on: ``cuda`` when compiled, ``cpu`` when interpreting."""
    return torch.device("cpu" if INTERPRETING or not torch.cuda.is_available() else "cuda")
