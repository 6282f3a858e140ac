"""Launch geometry of one verification chunk: block sizes and counts, cached per layout."""

from __future__ import annotations

import functools
from typing import NamedTuple

import kernels._device  # noqa: F401
import triton

from kernels import tuning
from kernels.residual_sample import race_block_size


class Geometry(NamedTuple):
    """Launch parameters that depend only on the vocabulary, the request count and the output width."""

    block_v: int
    num_vblocks: int
    race_block: int
    race_blocks: int
    nvb_pow2: int
    race_pow2: int
    rows_pow2: int


@functools.lru_cache(maxsize=512)
def geometry(vocab_size: int, num_reqs: int, width: int, block_size: int | None,
             knobs: tuning.Knobs) -> Geometry:
    """Cached per layout (``knobs``, the environment overrides, are part of the key)."""
    block_v = block_size or tuning.fit_block(knobs.block_v, vocab_size)
    race_block = race_block_size(num_reqs, vocab_size, block_size or tuning.fit_block(knobs.race_block_v,
                                                                                       vocab_size))
    num_vblocks, race_blocks = triton.cdiv(vocab_size, block_v), triton.cdiv(vocab_size, race_block)
    # Floors keep the number of compiled variants small (one per dtype/method for common shapes).
    return Geometry(block_v, num_vblocks, race_block, race_blocks,
                    nvb_pow2=max(64, triton.next_power_of_2(num_vblocks)),
                    race_pow2=max(64, triton.next_power_of_2(race_blocks)),
                    rows_pow2=max(16, triton.next_power_of_2(width)))
