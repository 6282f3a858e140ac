"""plan_chunks: contiguous, covering, never splitting a request, within budget, greedy (Hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.chunking import plan_chunks


def check_plan(cu, budget, plan) -> None:
    """Raise AssertionError unless ``plan`` is a valid greedy chunking of ``cu`` under ``budget``."""
    num_reqs = len(cu) - 1
    assert [s for s, _ in plan] == ([0] + [e for _, e in plan[:-1]] if plan else []), "chunks not contiguous"
    assert (plan[-1][1] if plan else 0) == num_reqs, "chunks do not cover every request"
    for start, end in plan:
        assert 0 <= start < end <= num_reqs, "empty or out-of-range chunk"
        rows = cu[end] - cu[start]
        assert rows <= budget or end - start == 1, "chunk over budget with more than one request"
        if end < num_reqs:
            assert cu[end + 1] - cu[start] > budget, "greedy packing would have taken the next request"


row_counts = st.lists(st.integers(1, 20), min_size=0, max_size=30)


@given(rows=row_counts, budget=st.integers(1, 60))
def test_plan_is_valid_and_greedy(rows, budget):
    cu = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    check_plan(cu, budget, plan_chunks(cu, budget))


@given(rows=row_counts)
def test_unlimited_or_huge_budget_gives_one_chunk(rows):
    cu = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    expected = [(0, len(rows))] if rows else []
    assert plan_chunks(cu, None) == expected
    assert plan_chunks(cu, int(cu[-1]) + 1) == expected


def test_notes_example_and_documented_edges():
    assert plan_chunks([0, 3, 4, 11, 13], 5) == [(0, 2), (2, 3), (3, 4)]
    assert plan_chunks([0], 5) == []
    assert plan_chunks([0, 7], 1) == [(0, 1)]  # an oversize request runs alone
    for budget in (0, -3):
        with pytest.raises(ValueError):
            plan_chunks([0, 2], budget)
    with pytest.raises(ValueError):
        plan_chunks([0, 3, 2], 4)
    with pytest.raises(ValueError):
        plan_chunks([1, 3], 4)


@pytest.mark.parametrize(
    "broken",
    [
        lambda cu, b: [(s, e) for s, e in plan_chunks(cu, b)][:-1],  # drops the last chunk
        lambda cu, b: [(i, i + 1) for i in range(len(cu) - 1)],  # never packs (not greedy)
        lambda cu, b: [(0, len(cu) - 1)],  # ignores the budget
        lambda cu, b: [(0, 1), (2, len(cu) - 1)],  # skips a request
    ],
)
def test_check_plan_catches_broken_planners(broken):
    cu = np.array([0, 3, 4, 11, 13, 14, 16])
    with pytest.raises(AssertionError):
        check_plan(cu, 5, broken(cu, 5))
