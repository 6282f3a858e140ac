"""Launch parameters of the split-vocabulary passes (overridable from the environment for tuning).

Results do not depend on them beyond float32 ties (randomness is keyed by vocabulary index, never by
block). ``SPECFUZZ_BLOCK_V``, ``SPECFUZZ_STATS_WARPS`` and ``SPECFUZZ_RACE_WARPS`` override them.
"""

from __future__ import annotations

import os

import kernels._device


def block_size() -> int:
    """Vocabulary block of the statistics and residual-mass passes; small under the interpreter so
    tests span several blocks."""
    return int(os.environ.get("SPECFUZZ_BLOCK_V", 256 if kernels._device.INTERPRETING else 8192))


def race_block_size() -> int:
    """Largest vocabulary block of the sampling race (halved down to 512 when few requests)."""
    return int(os.environ.get("SPECFUZZ_RACE_BLOCK_V", 256 if kernels._device.INTERPRETING else 4096))


def stats_warps() -> int:
    return int(os.environ.get("SPECFUZZ_STATS_WARPS", 8))


def race_warps() -> int:
    return int(os.environ.get("SPECFUZZ_RACE_WARPS", 8))


# Opt-in (``SPECFUZZ_OVERLAP=1``): large chunks are split into parts whose sampling race (ALU-bound)
# runs on a high-priority side stream while the next part's statistics pass (memory-bound) runs on the
# caller's stream. Off by default until it has been measured on the H200 (docs/kernels.md).
OVERLAP_PARTS = 4
OVERLAP_MIN_PART = 32


def overlap() -> bool:
    return os.environ.get("SPECFUZZ_OVERLAP", "0") == "1"
