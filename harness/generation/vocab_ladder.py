"""Vocabulary sizes drawn from a ladder of rungs, so that a run compiles few Triton variants.

A compiled Triton kernel is specialised on its block sizes (usually the next power of two of ``V``
up to a cap), on whether ``V`` and the row strides are multiples of 16, and on ``V == 1``
(harness/compiles/keys.py). Drawing ``V`` anywhere in ``1..262144``, with every other choice drawn
independently too, made nearly every case a new specialisation: a gpu-profile check of our kernels
planned about 800 distinct keys (docs/fast-verdicts.md), each a compile of seconds on a cold cache.
The ladder bounds the vocabulary part; harness/generation/shape_palette.py bounds the combinations.

A *rung* is the half-open power-of-two bucket ``(P/2, P]`` (``P`` a power of two; ``P = 1`` is the
single size 1), clipped to the profile's ``max_vocab``. Every size in a rung shares the
power-of-two block sizes, so a rung costs at most two specialisation classes (sizes that are
multiples of 16 and ragged ones), however many sizes are drawn from it. Inside a rung everything
stays reachable: ragged sizes (not multiples of 16, of 4, primes), aligned sizes, the rung's ends
(``P/2 + 1`` and ``P``, ``P - 1``) and the special sizes of harness/generation/strategies.py that fall in it.
What a ladder gives up is the buckets between its rungs; each profile's rungs keep one of each kind
of kernel behaviour that depends on ``V`` (docs/fast-verdicts.md has the argument):

- 1 (degenerate: one token, strides equal to 1);
- (4, 8] and (8, 16]: rows narrower than the smallest block (masked lanes, partial Philox quads);
- (512, 1024] and (4096, 8192] on GPU profiles: one block with 4 and 8 warps; (128, 256] and
  (256, 512] where the interpreter's 256-wide blocks make the second one a two-block row;
- (8192, 16384]: two 8192-wide blocks, the last one ragged;
- (131072, 262144]: production vocabularies (151936, 262144), hundreds of race blocks.
"""

from __future__ import annotations

from hypothesis import strategies as st

ALIGN = 16  # Triton specialises integers and addresses on divisibility by 16


def rung_range(top: int, max_vocab: int) -> tuple[int, int] | None:
    """``(low, high)``: the sizes ``low..high`` of the rung with upper end ``top`` (a power of two),
    clipped to ``max_vocab``; None when the rung lies wholly above it."""
    low = 1 if top == 1 else top // 2 + 1
    high = min(top, max_vocab)
    return (low, high) if low <= high else None


def rungs_within(tops: tuple[int, ...], max_vocab: int) -> list[tuple[int, int]]:
    """The rungs of ``tops`` that a space of ``max_vocab`` reaches, smallest first, and always the
    rung holding ``max_vocab`` itself (a kernel or property with a small domain keeps its top)."""
    rungs = {r for r in (rung_range(t, max_vocab) for t in tops) if r is not None}
    rungs.add(rung_range(1 << (max_vocab - 1).bit_length(), max_vocab))
    return sorted(rungs)


def rung_sizes(low: int, high: int, special: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
    """A size in ``low..high``: its ends and the special sizes inside it, a multiple of 16, or any."""
    marked = sorted({low, high, max(low, high - 1), *(v for v in special if low <= v <= high)})
    parts = [st.sampled_from(marked)]
    first, last = -(-low // ALIGN), high // ALIGN
    if first <= last:
        parts.append(st.integers(first, last).map(lambda m: m * ALIGN))
    parts.append(st.integers(low, high))
    return st.one_of(*parts)


def ladder_sizes(tops: tuple[int, ...], max_vocab: int,
                 special: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
    """A rung (smallest first, so shrinking goes down the ladder), then a size inside it."""
    rungs = rungs_within(tops, max_vocab)
    return st.sampled_from(rungs).flatmap(lambda r: rung_sizes(r[0], r[1], special))
