"""Mutation testing: the catalogue stays in sync with kernels/, the machinery applies exactly one edit
to a copy, the child refuses to test anything but the copy, and a fast subset of mutants is killed.

``test_catalogue_anchors_match_current_kernels`` is the loud one: when someone edits kernels/ so that
an anchor no longer occurs exactly once, it fails listing every stale mutant. Fix the anchor (or the
mutant) in harness/mutation/catalogue.py in the same change.
"""

from __future__ import annotations

import filecmp
import subprocess
import sys

import pytest

from harness.mutation.catalogue import CATALOGUE, Mutant, by_name
from harness.mutation.mutate import (
    CHILD_SOURCE,
    EQUIVALENT,
    KERNELS_DIR,
    KILLED,
    REPO_ROOT,
    SURVIVED,
    AnchorError,
    anchor_problems,
    kill_matrix,
    make_copy,
    mutated_source,
    run_campaign,
)

# BUGS.md classes that apply to our kernels' source. Not applicable: 16 (out-of-memory from fp32
# [tokens, V] copies: our kernels allocate no such copy, a source edit cannot add one and a CPU run
# cannot observe device memory).
APPLICABLE_BUG_CLASSES = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 20}
GENERIC_FAMILIES = {
    "comparison",
    "off-by-one",
    "other-value",
    "dropped-mask",
    "swapped-operands",
    "min-max-swap",
}


def test_catalogue_anchors_match_current_kernels():
    problems = anchor_problems()
    assert not problems, (
        "harness/mutation/catalogue.py is out of sync with kernels/ -- update these anchors:\n  "
        + "\n  ".join(problems)
    )


def test_catalogue_covers_bug_classes_and_operator_families():
    assert len(CATALOGUE) >= 25
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)
    bug_classes = {int(m.bug_class.split("#")[1]) for m in CATALOGUE if m.bug_class.startswith("BUGS#")}
    assert APPLICABLE_BUG_CLASSES <= bug_classes, APPLICABLE_BUG_CLASSES - bug_classes
    families = {m.bug_class.split(":")[1] for m in CATALOGUE if m.bug_class.startswith("generic:")}
    assert GENERIC_FAMILIES <= families, GENERIC_FAMILIES - families
    for m in CATALOGUE:
        assert m.description and m.anchor != m.replacement, m.name
        assert not m.equivalent or len(m.equivalent) > 80, f"{m.name}: an equivalence needs an argument"
        assert m.equivalent or m.killers, f"{m.name}: name the properties expected to kill it"
    assert sum(m.fast for m in CATALOGUE) >= 4


def test_copy_differs_from_kernels_in_exactly_the_mutated_file(tmp_path):
    mutant = by_name(["padding-zero"])[0]
    copy = make_copy(tmp_path, mutant)
    cmp = filecmp.dircmp(KERNELS_DIR, copy, ignore=["__pycache__"])
    assert cmp.diff_files == [mutant.file] and not cmp.left_only and not cmp.right_only
    text = (copy / mutant.file).read_text()
    assert mutant.replacement in text and text.count(mutant.anchor) == 0
    assert (KERNELS_DIR / mutant.file).read_text().count(mutant.anchor) == 1, "the real tree is untouched"


def test_stale_anchor_is_refused(tmp_path):
    stale = Mutant(
        "stale", "generic:test", "decide.py", "this text is not in the kernels", "x", "d", ("structural",)
    )
    dup = Mutant("dup", "generic:test", "decide.py", "import", "x", "d", ("structural",))
    problems = anchor_problems([stale, dup])
    assert any("stale: anchor occurs 0 times" in p for p in problems)
    assert any("dup: anchor occurs" in p for p in problems)
    with pytest.raises(AnchorError):
        mutated_source(stale)
    with pytest.raises(AnchorError):
        run_campaign([stale], baseline=False, progress=lambda s: None)


def test_child_refuses_to_run_without_the_mutated_copy(tmp_path):
    # No kernels/ under tmp_path: the import falls through to the real tree, which must be refused.
    proc = subprocess.run(
        [sys.executable, "-c", CHILD_SOURCE, str(tmp_path), str(REPO_ROOT), "check", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "not from the mutated copy" in proc.stderr


def test_equivalent_mutants_are_reported_not_run():
    equivalent = [m for m in CATALOGUE if m.equivalent]
    run = run_campaign(equivalent, baseline=False, progress=lambda s: None)
    assert all(r.status == EQUIVALENT and r.detail for r in run.results)
    assert "argued equivalent" in kill_matrix(run)


@pytest.mark.interpreter
def test_fast_subset_is_killed(tmp_path):
    """CI's fast subset: each fast mutant against its expected killers, after an unmutated baseline."""
    fast = [m for m in CATALOGUE if m.fast]
    lines = []
    run = run_campaign(fast, profile="ci", seed=0, timeout_s=420, fast=True, progress=lines.append)
    print(kill_matrix(run))
    assert run.baseline.status == SURVIVED, run.baseline.detail
    survivors = [(r.name, r.status, r.detail) for r in run.results if r.status != KILLED]
    assert not survivors, survivors
    assert all(r.killer in by_name([r.name])[0].killers for r in run.results)


def test_a_failing_baseline_stops_the_campaign(monkeypatch):
    """The unmutated kernels are checked first, with the mutants' settings; when they fail, no mutant
    runs (a kill matrix would be meaningless)."""
    import harness.mutation.mutate as mutate
    from harness.mutation.mutate import MutantResult

    plain = by_name(["residual-uses-accept-stream"])
    calls = []

    def fake_run_one(mutant, *, env_extra=None, **_):
        calls.append((mutant.name if mutant else None, env_extra))
        return MutantResult(mutant.name if mutant else "(baseline)", "", KILLED)

    monkeypatch.setattr(mutate, "run_one", fake_run_one)
    with pytest.raises(RuntimeError, match="do not pass the check"):
        run_campaign(plain, progress=lambda s: None)
    assert calls == [(None, None)]


def test_fuzz_mode_reads_the_earliest_failure(tmp_path):
    from harness.mutation.mutate import _first_failure, check_args

    args = check_args("k:k", "ci", 3, tmp_path, ("structural", "coupled_exactness"), fuzz_s=90)
    assert args[:1] == ["fuzz"] and "--stop-on-failure" in args and args.count("--only") == 2
    report = {
        "properties": [
            {
                "name": "structural",
                "verdict": "fail",
                "seconds": 50,
                "failures": [{"class": "a", "found_after_s": 40.0}],
            },
            {
                "name": "coupled_exactness",
                "verdict": "fail",
                "seconds": 9,
                "failures": [{"class": "b", "found_after_s": 7.5}],
            },
        ]
    }
    (tmp_path / "report.json").write_text(__import__("json").dumps(report))
    assert _first_failure(tmp_path / "report.json") == ("coupled_exactness", "b", 7.5)
