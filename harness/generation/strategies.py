"""Hypothesis strategies that draw ``Case`` descriptions (harness/generation/cases.py) of verification
batches.

What is drawn element by element is only the small, structural part of a case (sizes, per-request
temperatures, seeds, positions, family, dtype, chunk budget); the bulk logits come from a drawn
``data_seed``. Every choice is ordered so that Hypothesis shrinks toward the simplest batch: small
``V``, one request, short drafts, temperature 1-ish, float32, the Gaussian family, no chunking.

``CaseSpace`` says what may be drawn; build it from a profile and a kernel's capabilities with
``CaseSpace.for_kernel`` and narrow it with ``dataclasses.replace`` (e.g. ``max_draft=1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from harness.contract import capabilities_of
from harness.generation.cases import Case
from harness.generation.logit_families import FAMILIES
from harness.generation.seeded_draws import pin_draws
from harness.generation.shape_palette import fit, request_counts, request_limit
from harness.generation.vocab_ladder import ladder_sizes
from harness.profiles import Profile

pin_draws()  # the same seed draws the same cases in every process (harness/generation/seeded_draws.py)

_PRIMES = (2, 3, 5, 7, 11, 13, 31, 61, 127, 251, 257, 509, 1021, 4093, 8191, 65521, 131071)
_POWERS = tuple(v for e in range(19) for v in (2**e - 1, 2**e, 2**e + 1) if v >= 1)
SPECIAL_VOCABS = tuple(sorted(set(_PRIMES + _POWERS + (1, 2, 111, 8193, 10000, 32000, 151936, 262144))))

TEMPERATURE_BANDS = ("normal", "greedy", "tiny", "hot")  # shrink order: simplest first
SCALES = (1.0, 0.1, 3.0, 10.0)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def temperature_band(t: float) -> str:
    """The band a temperature belongs to (for coverage reports)."""
    if t == 0.0:
        return "greedy"
    if t <= 1e-3:
        return "tiny"
    if t >= 50.0:
        return "hot"
    return "normal"


def chunk_band(max_chunk_bytes: int | None, vocab_size: int) -> str:
    """``none``, ``1B``, ``<row`` (below one fp32 row), ``rows`` (a few rows) or ``large``."""
    if max_chunk_bytes is None:
        return "none"
    if max_chunk_bytes <= 1:
        return "1B"
    row = 4 * vocab_size
    if max_chunk_bytes < row:
        return "<row"
    return "rows" if max_chunk_bytes <= 16 * row else "large"


@dataclass(frozen=True)
class CaseSpace:
    """The part of the fuzz space a strategy may draw from."""

    max_vocab: int
    max_reqs: int
    max_draft: int
    methods: tuple[str, ...] = ("token", "block")
    dtypes: tuple[str, ...] = ("float32",)
    families: tuple[str, ...] = FAMILIES
    temperature_bands: tuple[str, ...] = TEMPERATURE_BANDS
    min_temperature: float = 0.0  # the kernel's domain: no positive temperature below it is drawn
    draft_logits: tuple[bool, ...] = (True, False)  # True: draft logits present; False: point mass
    chunking: bool = False
    logprobs: bool = False
    min_draft: int = 0
    max_logit_elements: int = 1 << 21  # cap on num_logits * V (fewer requests are drawn at large V)
    vocab_rungs: tuple[int, ...] | None = None  # the profile's ladder (harness/generation/vocab_ladder.py)
    shapes: tuple | None = None  # the run's palette (harness/generation/shape_palette.py); None: draw freely

    @classmethod
    def for_kernel(cls, profile: Profile, kernel: object) -> CaseSpace:
        """Everything the profile allows that the kernel claims."""
        caps = capabilities_of(kernel)
        names = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}
        dtypes = tuple(n for n in names if any(str(d).endswith(n) for d in caps.dtypes)) or ("float32",)
        methods = tuple(m for m in ("token", "block") if m in getattr(kernel, "methods", ()))
        bands = tuple(b for b in TEMPERATURE_BANDS if caps.greedy or b != "greedy")
        return cls(
            max_vocab=max(1, min(profile.max_vocab, caps.max_vocab)),
            max_reqs=profile.max_reqs,
            max_draft=min(profile.max_draft, caps.max_draft_len),
            methods=methods,
            dtypes=dtypes,
            temperature_bands=bands,
            min_temperature=caps.min_temperature,
            draft_logits=draft_kinds(caps),
            chunking=caps.chunking,
            logprobs=caps.logprobs,
            max_logit_elements=profile.max_logit_elements,
            vocab_rungs=profile.vocab_rungs,
        )


def draft_kinds(caps) -> tuple[bool, ...]:
    """The draft kinds a kernel claims: ``True`` draft logits, ``False`` point-mass drafts."""
    kinds = tuple(k for k, ok in ((True, caps.draft_logits), (False, caps.point_mass_drafts)) if ok)
    return kinds or (True,)


def vocab_sizes(max_vocab: int, rungs: tuple[int, ...] | None = None) -> st.SearchStrategy[int]:
    """Special sizes (powers of two and neighbours, primes, 111, 8193, 151936 ...) or any size; with
    ``rungs``, a size on that ladder (its special sizes included)."""
    if rungs:
        return ladder_sizes(rungs, max_vocab, SPECIAL_VOCABS)
    special = [v for v in SPECIAL_VOCABS if v <= max_vocab]
    return st.one_of(st.sampled_from(special), st.integers(1, max_vocab))


def in_temperature_domain(t: float, min_temperature: float) -> bool:
    """True when ``t`` is greedy (0) or a positive temperature the kernel serves."""
    return t == 0.0 or t >= min_temperature


def lowest_in_domain(min_temperature: float) -> float:
    """The smallest float32 temperature at or above ``min_temperature`` (for fixed tiny cases)."""
    t = np.float32(min_temperature)
    # float(t): compared in float64 (NumPy 2 would compare a float32 with a Python float in float32)
    return float(t) if float(t) >= min_temperature else float(np.nextafter(t, np.float32(np.inf)))


@st.composite
def temperatures(draw, bands: tuple[str, ...], min_temperature: float = 0.0) -> float:
    """A temperature from one of ``bands``; T == 1 (band ``normal``, fraction 0) is the simplest.

    Every band draws the same two choices, so that Hypothesis's shortlex shrinking prefers the first
    band (``normal``) instead of whichever band happens to draw fewer choices. The ``tiny`` band spans
    1e-8..1e-3, or, for a kernel whose domain starts higher, the decade above ``min_temperature``;
    no positive temperature below ``min_temperature`` is ever drawn.
    """
    band = draw(st.sampled_from(bands))
    fraction = draw(st.floats(-1.0, 1.0))  # position inside the band, shrinks toward 0.0
    if band == "greedy":
        return 0.0
    if band == "hot":
        return 100.0
    if band == "tiny":
        low = max(-8.0, float(np.log10(min_temperature))) if min_temperature > 0 else -8.0
        high = max(-3.0, low + 1.0)
        exponent = low + (high - low) * (fraction + 1.0) / 2.0
    else:
        exponent = fraction  # 0.1..10
    t = float(np.float32(10.0**exponent))  # exactly representable, so JSON round trips
    return t if t >= min_temperature else lowest_in_domain(min_temperature)


def positions() -> st.SearchStrategy[int]:
    """Small positions, positions straddling 2**32 (the counter word boundary), and large ones."""
    return st.one_of(st.integers(0, 4096), st.integers(2**32 - 16, 2**32 + 16), st.integers(0, 2**40))


@st.composite
def chunk_budgets(draw, vocab_size: int, num_logits: int) -> int | None:
    """``None`` (unbounded), 1 byte, about a few fp32 rows (+-1 byte), or anything up to 16 MiB."""
    kind = draw(st.sampled_from(("none", "one_byte", "rows", "any")))
    if kind == "none":
        return None
    if kind == "one_byte":
        return 1
    if kind == "rows":
        rows = draw(st.integers(1, max(1, num_logits)))
        return max(1, 4 * vocab_size * rows + draw(st.integers(-1, 1)))
    return draw(st.integers(1, 1 << 24))


@st.composite
def cases(draw, space: CaseSpace) -> Case:
    """One batch description drawn from ``space``; with a palette, its shape first (its vocabulary
    class, dtype, method, drafts, logprobs and batch class), then the rest."""
    shape = fit(draw(st.sampled_from(space.shapes)), space) if space.shapes else None
    if shape is None:
        vocab = draw(vocab_sizes(space.max_vocab, space.vocab_rungs))
    else:
        vocab = draw(shape.vocab.sizes(SPECIAL_VOCABS))
    max_reqs = request_limit(space, vocab)
    num_reqs = draw(st.integers(1, max_reqs) if shape is None else request_counts(shape, max_reqs))
    draft_lens = draw(
        st.lists(st.integers(space.min_draft, space.max_draft), min_size=num_reqs, max_size=num_reqs)
    )
    temps = [draw(temperatures(space.temperature_bands, space.min_temperature)) for _ in range(num_reqs)]
    seeds = draw(st.lists(st.integers(INT64_MIN, INT64_MAX), min_size=num_reqs, max_size=num_reqs))
    poss = draw(st.lists(positions(), min_size=num_reqs, max_size=num_reqs))
    num_logits = sum(draft_lens) + num_reqs
    return Case(
        vocab_size=vocab,
        draft_lens=draft_lens,
        temperatures=temps,
        seeds=seeds,
        positions=poss,
        family=draw(st.sampled_from(space.families)),
        scale=draw(st.sampled_from(SCALES)),
        dtype=draw(st.sampled_from(space.dtypes)) if shape is None else shape.dtype,
        has_draft_logits=draw(st.sampled_from(space.draft_logits)) if shape is None else shape.draft_logits,
        data_seed=draw(st.integers(0, 2**32 - 1)),
        method=draw(st.sampled_from(space.methods)) if shape is None else shape.method,
        max_chunk_bytes=draw(chunk_budgets(vocab, num_logits)) if space.chunking else None,
        want_logprobs=(draw(st.booleans()) if shape is None else shape.logprobs) if space.logprobs else False,
    )


def coverage_of(case: Case) -> dict[str, list]:
    """The coverage dimensions of the report schema (docs/interfaces.md section 5) for one case."""
    return {
        "vocab_size": [case.vocab_size],
        "draft_len": list(case.draft_lens),
        "temperature_band": [temperature_band(t) for t in case.temperatures],
        "family": [case.family],
        "chunk_budget": [chunk_band(case.max_chunk_bytes, case.vocab_size)],
        "dtype": [case.dtype],
        "method": [case.method],
    }
