"""A run's palette of case shapes: the few combinations of compile-relevant choices its cases use.

What a compiled Triton kernel specialises on is decided by a handful of a case's choices: the
vocabulary class (power-of-two rung, multiple of 16 or not: harness/generation/vocab_ladder.py), the logit
dtype, the method, draft logits or point-mass drafts, logprobs, and a few or many requests (kernels
switch to a single fused launch for small batches; ours at 4). Drawn independently, their product
(a few hundred combinations) makes nearly every case a new compile: a gpu-profile check planned about
800 distinct specialisation keys (docs/fast-verdicts.md).

A palette fixes, per run, a list of ``Shape`` s, each one value of each of these choices, chosen so
that every value of every choice appears, and every (dtype, method, drafts) combination appears
once; vocabulary classes and those combinations are paired by a permutation drawn from the run's
seed (never a float32 combination with the one-token class ``V = 1``), and logprobs and batch size
alternate. Every case of every property of the run draws one shape
(index 0, the simplest, is where shrinking goes) and everything else freely: the size inside the
shape's vocabulary class, request count inside its batch class, draft lengths, temperatures, seeds,
positions, logit family and scale, chunk budget. All properties of a run share the palette, so a
shape compiled by one property is reused by the next. Other seeds give other pairings, so every
combination is reached over runs (nightly campaigns draw without a palette).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np
from hypothesis import strategies as st

from harness.generation.vocab_ladder import ALIGN, rung_sizes, rungs_within

FEW_REQUESTS = 4  # a "few requests" batch has 1..4; ours fuses small batches up to 4 (kernels/tuning.py)


@dataclass(frozen=True)
class VocabClass:
    """Sizes ``low..high`` (one rung) that are multiples of 16 (``aligned``) or not."""

    low: int
    high: int
    aligned: bool

    def sizes(self, special: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
        if self.aligned:
            return st.integers(-(-self.low // ALIGN), self.high // ALIGN).map(lambda m: m * ALIGN)
        marked = tuple(v for v in special if v % ALIGN)
        return rung_sizes(self.low, self.high, marked).map(self._ragged)

    def _ragged(self, v: int) -> int:
        """``v``, or its neighbour inside the rung when ``v`` is a multiple of 16."""
        if v % ALIGN:
            return v
        return v - 1 if v - 1 >= self.low else v + 1


@dataclass(frozen=True)
class Shape:
    vocab: VocabClass
    dtype: str
    method: str
    draft_logits: bool
    logprobs: bool
    many_requests: bool


def vocab_classes(tops: tuple[int, ...], max_vocab: int) -> list[VocabClass]:
    """Both classes of every rung that has sizes of that class, smallest first."""
    out = []
    for low, high in rungs_within(tops, max_vocab):
        if -(-low // ALIGN) <= high // ALIGN:
            out.append(VocabClass(low, high, True))
        if any(v % ALIGN for v in range(low, min(high, low + ALIGN) + 1)):
            out.append(VocabClass(low, high, False))
    return sorted(out, key=lambda c: (c.high, c.aligned))


def request_limit(space, vocab: int) -> int:
    """The most requests a case of ``vocab`` may have (harness/generation/strategies.py ``cases``)."""
    rows_allowed = max(1, space.max_logit_elements // vocab)
    return max(1, min(space.max_reqs, rows_allowed // (space.max_draft + 1)))


def palette(space, seed: int) -> tuple[Shape, ...]:
    """The run's shapes for ``space`` (module docstring), simplest first."""
    rng = np.random.default_rng(seed)
    classes = vocab_classes(space.vocab_rungs or (), space.max_vocab)
    combos = list(itertools.product(space.dtypes, space.methods, space.draft_logits))
    logprobs = (False, True) if space.logprobs else (False,)
    count = max(len(classes), len(combos))
    class_order, combo_order = rng.permutation(len(classes)), rng.permutation(len(combos))
    shift = int(rng.integers(0, 2))
    shapes = []
    for i in range(count):
        vocab = classes[class_order[i % len(classes)]]
        dtype, method, draft = combos[combo_order[i % len(combos)]]
        many = (i + shift) % 2 == 1 and request_limit(space, vocab.high) > FEW_REQUESTS
        shapes.append(Shape(vocab, dtype, method, draft, logprobs[(i // 2 + shift) % len(logprobs)], many))
    _float32_off_degenerate(shapes)
    order = {name: i for i, name in enumerate((*space.dtypes, *space.methods))}
    shapes.sort(key=lambda s: (s.vocab.high, s.vocab.aligned, order[s.dtype], order[s.method],
                               not s.draft_logits, s.logprobs, s.many_requests))
    return tuple(shapes)


def _float32_off_degenerate(shapes: list[Shape]) -> None:
    """A float32 shape drawn onto ``V = 1`` (one token: no decision to get wrong, whatever the
    dtype) trades its vocabulary class with a 16-bit shape, so that every float32 combination meets
    real rows: float32 is where a shift of the logits by thousands stays exact (logit_shift) and where
    most numerical traps of the crafted cases live."""
    for i, s in enumerate(shapes):
        if s.vocab.high != 1 or s.dtype != "float32":
            continue
        j = next((j for j, o in enumerate(shapes) if o.dtype != "float32" and o.vocab.high > 1), None)
        if j is not None:
            shapes[i], shapes[j] = replace(s, vocab=shapes[j].vocab), replace(shapes[j], vocab=s.vocab)


def fit(shape: Shape, space) -> Shape:
    """``shape`` inside a property's narrowed ``space``: a choice the space does not allow becomes
    the space's first (simplest) one; a vocabulary class above ``max_vocab`` becomes the space's
    class at the same position of its own ladder."""
    vocab = shape.vocab
    if vocab.low > space.max_vocab:
        own = vocab_classes(space.vocab_rungs or (), space.max_vocab)
        vocab = own[(vocab.low.bit_length() * 2 + vocab.aligned) % len(own)]
    elif vocab.high > space.max_vocab:
        vocab = replace(vocab, high=space.max_vocab)
        if vocab.aligned and -(-vocab.low // ALIGN) > vocab.high // ALIGN:
            vocab = replace(vocab, aligned=False)
    pick = lambda value, allowed: value if value in allowed else allowed[0]
    return Shape(
        vocab,
        pick(shape.dtype, space.dtypes),
        pick(shape.method, space.methods),
        pick(shape.draft_logits, space.draft_logits),
        shape.logprobs and space.logprobs,
        shape.many_requests,
    )


def request_counts(shape: Shape, limit: int) -> st.SearchStrategy[int]:
    """A request count in the shape's batch class, within ``limit``."""
    if shape.many_requests and limit > FEW_REQUESTS:
        return st.integers(FEW_REQUESTS + 1, limit)
    return st.integers(1, min(FEW_REQUESTS, limit))
