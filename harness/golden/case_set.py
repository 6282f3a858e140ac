"""The deterministic case set of a golden file (``python -m harness record``).

``golden_cases(kernel, profile, seed)`` returns ``harness.generation.cases.Case`` descriptions that cover
what a
kernel claims, sized by a profile:

- one case per (method, dtype, drafts mode) cell of the claimed space (draft logits and point-mass
  drafts), repeated for ``rounds(profile)`` rounds (or ``num_rounds``) with other draws;
- every case mixes greedy and sampled requests (temperature bands normal, tiny and hot), ragged
  draft lengths from 0 to the profile's ``max_draft`` (k = 0 in every case of two or more requests),
  positions below, across and far above 2**32, and int64 seeds over their whole range;
- vocabulary sizes rotate through a ladder (1, 2, 3, 7, 64, 257, 1021, 8193, 32000, 151936) capped
  by and always including the profile's maximum; logit families rotate through all of them;
- chunk budgets rotate through none / 1 byte / about two rows when the kernel claims chunking, and
  two thirds of the cases ask for logprobs when the kernel claims them;
- one case of greedy requests at the largest V whose row maxima tie across vocabulary blocks;
- the crafted coupled cases of ``harness.generation.crafted`` (rare events placed with chosen seeds) follow,
  those whose target logits exceed the profile's ``max_logit_elements`` left out (on ci: the three
  race-order cases of 6 x 8192, about 50 s each under the Triton interpreter; gpu keeps them).

Contract: a pure function of (the kernel's methods and capabilities, the profile, ``seed``); every
random choice comes from ``numpy.random.default_rng`` seeded from ``seed`` and the cell, never from a
global generator. Each case respects the profile's ``max_reqs`` and ``max_logit_elements``.
"""

from __future__ import annotations

import zlib

import numpy as np

from harness.contract import capabilities_of
from harness.generation.cases import Case
from harness.generation.crafted import crafted_cases
from harness.generation.strategies import SCALES, CaseSpace
from harness.profiles import Profile

VOCAB_LADDER = (1, 2, 3, 7, 64, 257, 1021, 8193, 32000, 151936)
BANDS = ("greedy", "normal", "tiny", "hot", "normal")  # the order requests of a case take them in


def rounds(profile: Profile) -> int:
    """How many times the (method, dtype, drafts mode) grid is repeated: 2 on ci, 4 on gpu."""
    return max(2, profile.max_examples // 15)


def vocab_ladder(max_vocab: int) -> list[int]:
    """The ladder's sizes up to ``max_vocab``, and ``max_vocab`` itself."""
    return sorted({v for v in VOCAB_LADDER if v < max_vocab} | {max_vocab})


def _temperature(band: str, rng: np.random.Generator) -> float:
    if band == "greedy":
        return 0.0
    if band == "hot":
        return 100.0
    exponent = rng.uniform(-8.0, -3.0) if band == "tiny" else rng.uniform(-1.0, 1.0)
    return float(np.float32(10.0**exponent))


def _position(i: int, rng: np.random.Generator) -> int:
    kind = i % 3
    if kind == 0:
        return int(rng.integers(0, 4096))
    if kind == 1:
        return int(rng.integers(2**32 - 16, 2**32 + 16))
    return int(rng.integers(0, 2**40))


def _chunk_budget(kind: int, vocab: int) -> int | None:
    return (None, 1, 2 * 4 * vocab + 1)[kind % 3]


def _cell_case(
    space: CaseSpace, index: int, method: str, dtype: str, has_q: bool, vocab: int, rng: np.random.Generator
) -> Case:
    rows_allowed = max(1, space.max_logit_elements // vocab)
    max_draft = max(0, min(space.max_draft, rows_allowed - 1))
    num_reqs = max(1, min(space.max_reqs, rows_allowed // (max_draft + 1), 2 + index % 4))
    lens = [int(x) for x in rng.integers(0, max_draft + 1, size=num_reqs)]
    lens[0] = max_draft
    if num_reqs >= 2:
        lens[-1] = 0
    bands = [BANDS[(index + r) % len(BANDS)] for r in range(num_reqs)]
    if "greedy" in space.temperature_bands and num_reqs >= 2 and "greedy" not in bands:
        bands[1] = "greedy"
    bands = [b if b in space.temperature_bands else "normal" for b in bands]
    return Case(
        vocab_size=vocab,
        draft_lens=lens,
        temperatures=[_temperature(b, rng) for b in bands],
        seeds=[int(x) for x in rng.integers(-(2**63), 2**63 - 1, size=num_reqs, endpoint=True)],
        positions=[_position(index + r, rng) for r in range(num_reqs)],
        family=space.families[index % len(space.families)],
        scale=SCALES[index % len(SCALES)],
        dtype=dtype,
        has_draft_logits=has_q,
        data_seed=int(rng.integers(0, 2**32)),
        method=method,
        max_chunk_bytes=_chunk_budget(index, vocab) if space.chunking else None,
        want_logprobs=space.logprobs and index % 3 != 2,
    )


def golden_cases(
    kernel: object, profile: Profile, seed: int, crafted: bool = True, num_rounds: int | None = None
) -> list[Case]:
    """The case set described in the module docstring, in a fixed order."""
    space = CaseSpace.for_kernel(profile, kernel)
    ladder = vocab_ladder(space.max_vocab)
    cells = [(m, d, q) for m in space.methods for d in space.dtypes for q in space.draft_logits]
    cases = []
    for rnd in range(rounds(profile) if num_rounds is None else num_rounds):
        for c, (method, dtype, has_q) in enumerate(cells):
            index = rnd * len(cells) + c
            label = [seed, rnd, method, dtype, int(has_q)]
            rng = np.random.default_rng([zlib.crc32(str(x).encode()) for x in label])
            # the largest V in every round's first cell, the rest of the ladder in rotation
            vocab = ladder[-1] if c == 0 else ladder[(index + rnd) % len(ladder)]
            cases.append(_cell_case(space, index, method, dtype, has_q, vocab, rng))
    if "greedy" in space.temperature_bands:
        cases.append(_greedy_ties_case(space, seed))
    if crafted:
        extra = crafted_cases(space.methods, capabilities_of(kernel).dtypes)
        cases += [c for c in extra if _target_elements(c) <= space.max_logit_elements]
    return cases


def _greedy_ties_case(space: CaseSpace, seed: int) -> Case:
    """Greedy requests at the largest V over integer logits 0..2: the row maximum ties across many
    vocabulary blocks of any kernel, and the lowest index must win (BUGS.md class 12)."""
    rng = np.random.default_rng([zlib.crc32(str(x).encode()) for x in (seed, "greedy-ties")])
    vocab = space.max_vocab
    rows_allowed = max(1, space.max_logit_elements // vocab)
    k = max(0, min(space.max_draft, rows_allowed // 2 - 1))
    num_reqs = max(1, min(space.max_reqs, 3, rows_allowed // (k + 1)))
    lens = [k] + [int(x) for x in rng.integers(0, k + 1, size=num_reqs - 1)]
    return Case(
        vocab_size=vocab,
        draft_lens=lens,
        temperatures=[0.0] * num_reqs,
        seeds=[int(x) for x in rng.integers(0, 2**62, size=num_reqs)],
        positions=[int(x) for x in rng.integers(0, 4096, size=num_reqs)],
        family="ties",
        method=space.methods[0],
        has_draft_logits=space.draft_logits[0],
        data_seed=int(rng.integers(0, 2**32)),
        want_logprobs=space.logprobs,
        label="greedy rows whose maximum ties across vocabulary blocks",
    )


def _target_elements(case: Case) -> int:
    shape = case.tensors["target_logits"]["shape"] if "target_logits" in case.tensors else None
    if shape is None:
        return (sum(case.draft_lens) + case.num_reqs) * case.vocab_size
    return int(np.prod(shape))


def coverage(cases: list[Case]) -> dict[str, list]:
    """What the case set covers, for the record summary: sorted distinct values per dimension."""
    from harness.generation.strategies import temperature_band

    seen: dict[str, set] = {
        k: set()
        for k in (
            "method",
            "dtype",
            "drafts",
            "vocab_size",
            "draft_len",
            "temperature_band",
            "family",
            "chunk_budget",
            "logprobs",
        )
    }
    for c in cases:
        seen["method"].add(c.method)
        seen["dtype"].add(c.dtype)
        seen["drafts"].add("draft logits" if c.has_draft_logits else "point")
        seen["vocab_size"].add(c.vocab_size)
        seen["draft_len"].update(c.draft_lens)
        seen["temperature_band"].update(temperature_band(t) for t in c.temperatures)
        seen["family"].add(c.family)
        seen["chunk_budget"].add(str(c.max_chunk_bytes))
        seen["logprobs"].add(c.want_logprobs)
    return {k: sorted(v, key=str) for k, v in seen.items()}
