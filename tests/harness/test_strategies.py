"""Strategies draw well-formed cases inside their space, cover the bands, and shrink toward small."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from hypothesis import find, given, settings
from hypothesis import strategies as st

from harness.adapters.reference_kernel import kernel as reference
from harness.generation.cases import build_batch
from harness.generation.logit_families import FAMILIES, generate
from harness.generation.shape_palette import fit, palette, vocab_classes
from harness.generation.strategies import (
    SPECIAL_VOCABS,
    CaseSpace,
    cases,
    chunk_band,
    coverage_of,
    temperature_band,
    temperatures,
    vocab_sizes,
)
from harness.generation.vocab_ladder import rungs_within
from harness.profiles import CI_RUNGS, GPU_RUNGS, PROFILES
from harness.wellformed import degenerate_rows, malformations
from tests.harness import sabotage

SPACE = CaseSpace.for_kernel(PROFILES["ci"], reference)


def test_space_follows_profile_and_capabilities():
    assert SPACE.max_vocab == 300 and SPACE.max_reqs == 4 and SPACE.max_draft == 4
    assert set(SPACE.dtypes) == {"float32", "bfloat16", "float16"} and SPACE.chunking and SPACE.logprobs
    narrow = CaseSpace.for_kernel(PROFILES["gpu"], sabotage.TokenOnly())
    assert narrow.methods == ("token",) and narrow.dtypes == ("float32",)
    assert narrow.draft_logits == (True,) and not narrow.chunking and narrow.max_vocab == 262_144


def test_special_vocab_sizes():
    for v in (1, 2, 3, 111, 127, 255, 256, 257, 8191, 8192, 8193, 151936, 262144, 131071):
        assert v in SPECIAL_VOCABS


@settings(max_examples=40, derandomize=True)
@given(st.data())
def test_drawn_cases_are_well_formed_and_inside_the_space(data):
    case = data.draw(cases(SPACE))
    batch = build_batch(case)
    assert malformations(batch) == []
    assert degenerate_rows(batch) == []  # degenerate rows belong to the bad-input layer only
    assert 1 <= case.vocab_size <= SPACE.max_vocab and 1 <= case.num_reqs <= SPACE.max_reqs
    assert all(0 <= k <= SPACE.max_draft for k in case.draft_lens)
    assert case.dtype in SPACE.dtypes and case.method in SPACE.methods


@settings(max_examples=15, derandomize=True)
@given(st.data())
def test_unclaimed_features_are_never_drawn(data):
    space = CaseSpace.for_kernel(PROFILES["ci"], sabotage.TokenOnly())
    case = data.draw(cases(space))
    assert case.max_chunk_bytes is None and not case.want_logprobs and case.has_draft_logits
    assert case.method == "token" and case.dtype == "float32"


def test_shrinks_toward_small_batches():
    assert find(temperatures(SPACE.temperature_bands), lambda t: True) == 1.0
    assert find(vocab_sizes(SPACE.max_vocab), lambda v: True) == 1
    big = find(
        cases(SPACE),
        lambda c: c.vocab_size >= 100 and sum(c.draft_lens) >= 3,
        settings=settings(database=None, max_examples=2000),
    )
    # 129: the smallest size >= 100 on the ci ladder (its rung (128, 256] starts there)
    assert big.vocab_size == 129 and len(big.draft_lens) <= 2 and sum(big.draft_lens) <= 4, big


def test_bands_are_all_reachable():
    seen_t, seen_c, seen_v = set(), set(), set()
    space = replace(SPACE, max_vocab=300)

    @settings(max_examples=300, derandomize=True, database=None)
    @given(cases(space))
    def collect(case):
        cov = coverage_of(case)
        seen_t.update(cov["temperature_band"])
        seen_c.update(cov["chunk_budget"])
        seen_v.update(cov["vocab_size"])

    collect()
    assert seen_t == {"greedy", "tiny", "normal", "hot"}
    assert {"none", "1B", "rows"} <= seen_c
    assert {1, 111} & seen_v and max(seen_v) > 200


def test_band_helpers():
    assert [temperature_band(t) for t in (0.0, 1e-8, 1e-3, 0.1, 10.0, 100.0)] == [
        "greedy",
        "tiny",
        "tiny",
        "normal",
        "normal",
        "hot",
    ]
    assert [chunk_band(b, 10) for b in (None, 1, 39, 40, 400, 10_000)] == [
        "none",
        "1B",
        "<row",
        "rows",
        "rows",
        "large",
    ]


def test_bulk_arrays_depend_only_on_the_data_seed():
    args = ("gaussian", 1.0, 33, [2, 0, 3], [1.0, 0.0, 0.5], True)
    a, b, c = generate(*args, data_seed=5), generate(*args, data_seed=5), generate(*args, data_seed=6)
    assert np.array_equal(a.target, b.target) and np.array_equal(a.draft_token_ids, b.draft_token_ids)
    assert not np.array_equal(a.target, c.target)


def test_families_do_what_their_names_say():
    lens, temps = [3, 2], [1.0, 1.0]
    rows = np.array([0, 1, 2, 4, 5])  # target rows at the draft positions
    for family in FAMILIES:
        arr = generate(family, 1.0, 40, lens, temps, True, 3)
        assert arr.target.shape == (7, 40) and arr.draft.shape == (5, 40)
        assert np.isfinite(arr.target).any(axis=1).all(), family
    eq = generate("equal", 1.0, 40, lens, temps, True, 3)
    assert np.array_equal(eq.draft, eq.target[rows])
    zero = generate("target_zero", 1.0, 40, [8, 8], [1.0, 1.0], True, 3)
    zero_rows = np.concatenate([np.arange(8), np.arange(9, 17)])
    assert np.isneginf(zero.target[zero_rows, zero.draft_token_ids]).any()
    ties = generate("ties", 1.0, 40, lens, temps, False, 3)
    assert all(len(set(r)) < 40 for r in ties.target.tolist())
    hot = generate("one_hot", 1.0, 40, lens, temps, True, 3)
    assert (np.isfinite(hot.target).sum(axis=1) == 1).all()
    disjoint = generate("disjoint", 1.0, 40, lens, temps, True, 3)
    assert not (np.isfinite(disjoint.target[rows]) & np.isfinite(disjoint.draft)).any()
    assert torch.is_tensor(build_batch(replace_case_family("huge")).target_logits)


def replace_case_family(family):
    from tests.harness.property_helpers import simple_case

    return simple_case(family=family, dtype="float16")


def test_the_ladder_draws_every_kind_of_size_inside_its_rungs_only():
    rungs = [(1, 1), (5, 8), (9, 16), (129, 256), (257, 300)]
    assert rungs_within(CI_RUNGS, 300) == rungs
    seen = set()

    @settings(max_examples=600, derandomize=True, database=None)
    @given(vocab_sizes(300, CI_RUNGS))
    def collect(v):
        assert any(lo <= v <= hi for lo, hi in rungs), v
        seen.add(v)

    collect()
    assert {1, 5, 8, 9, 15, 16, 129, 255, 256, 257, 299, 300, 251} <= seen  # ends, special sizes
    assert any(v % 16 == 0 and v > 16 for v in seen) and any(v % 4 == 3 for v in seen)  # aligned, ragged
    # a narrower space keeps the rung holding its own largest size
    assert rungs_within(GPU_RUNGS, 100) == [(1, 1), (5, 8), (9, 16), (65, 100)]


def _palette_space(profile="gpu"):
    from harness.adapters.triton_kernels import kernel

    return CaseSpace.for_kernel(PROFILES[profile], kernel)


def test_a_palette_covers_every_choice_and_every_dtype_method_drafts_combination():
    space = _palette_space()
    shapes = palette(space, 7)
    combos = {(s.dtype, s.method, s.draft_logits) for s in shapes}
    assert len(combos) == 12 and len(shapes) == 12  # 3 dtypes x 2 methods x 2 draft kinds
    assert {s.vocab for s in shapes} == set(vocab_classes(space.vocab_rungs, space.max_vocab))
    assert {s.logprobs for s in shapes} == {False, True}
    assert {s.many_requests for s in shapes} == {False, True}
    assert shapes[0].vocab.high == 1 and palette(space, 7) == shapes and palette(space, 8) != shapes
    for seed in range(20):  # one token decides nothing: float32 combinations always meet real rows
        assert all(s.vocab.high > 1 for s in palette(space, seed) if s.dtype == "float32")


@settings(max_examples=120, derandomize=True, database=None)
@given(st.data())
def test_cases_keep_to_their_palette(data):
    space = replace(_palette_space("ci"), shapes=palette(_palette_space("ci"), 3))
    narrow = replace(space, methods=("token",), max_vocab=64)  # a property's narrowed space
    for sp in (space, narrow):
        case = data.draw(cases(sp))
        shape = next(s for s in map(lambda s: fit(s, sp), sp.shapes)
                     if (s.dtype, s.method, s.draft_logits, s.logprobs) ==
                     (case.dtype, case.method, case.has_draft_logits, case.want_logprobs)
                     and s.vocab.low <= case.vocab_size <= s.vocab.high
                     and (case.vocab_size % 16 == 0) == s.vocab.aligned)
        assert shape is not None and case.vocab_size <= sp.max_vocab and case.method in sp.methods
