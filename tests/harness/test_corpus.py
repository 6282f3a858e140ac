"""The regression corpus: well-formed entries, BUGS.md's degenerate inputs present, and CI replays the
whole corpus against our Triton kernels (the interpreter on CPU).

Entries whose batch would take the CPU interpreter too long (more than ``CPU_PROGRAM_BUDGET`` vocab
blocks in total) are replayed against the float64 oracle on CPU and against our kernels only on a
GPU; the test prints which ones, so nothing is skipped silently.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.adapters.reference_kernel import ReferenceKernel
from harness.campaigns.corpus import (
    CORPUS_DIR,
    SCHEMA,
    Entry,
    corpus_files,
    degenerate_seeds,
    load_entry,
    replay_entry,
    save_failure,
    write_entry,
)
from harness.generation.cases import build_batch
from harness.profiles import PROFILES
from harness.properties.base import RunContext

REPO = Path(__file__).resolve().parents[2]
CPU_PROGRAM_BUDGET = 64  # target rows x vocab blocks of 256 the interpreter replays per entry
FILES = corpus_files()


def interpreter_cost(entry: Entry) -> int:
    rows = sum(entry.case.draft_lens) * 2 + len(entry.case.draft_lens)
    return rows * -(-entry.case.vocab_size // 256)


def test_corpus_exists_and_every_entry_is_well_formed():
    assert len(FILES) >= 25, f"corpus too small: {len(FILES)} files in {CORPUS_DIR}"
    for path in FILES:
        raw = json.loads(path.read_text())
        assert raw["schema"] == SCHEMA, path
        entry = load_entry(path)
        assert path.stem == entry.name and entry.origin
        batch = build_batch(entry.case, "cpu")
        assert batch.vocab_size == entry.case.vocab_size and batch.num_reqs == len(entry.case.draft_lens)


def test_degenerate_seeds_are_all_in_the_corpus_unchanged():
    for entry in degenerate_seeds():
        path = CORPUS_DIR / f"{entry.name}.json"
        assert path.exists(), f"missing seed {path.name}: run `python -m harness corpus seed`"
        assert json.loads(path.read_text()) == json.loads(json.dumps(entry.to_json())), path.name


def test_seeds_cover_the_bugs_md_degenerate_list():
    entries = degenerate_seeds()
    vocabs = {e.case.vocab_size for e in entries}
    assert {1, 2, 111, 8193, 10000, 151936, 262144} <= vocabs
    families = {e.case.family for e in entries}
    assert {"equal", "disjoint", "target_zero", "huge"} <= families
    names = " ".join(e.name for e in entries)
    for needle in ("one-hot-target-equals-draft", "all-neg-inf-but-one", "k0", "one-long-beside-many-empty"):
        assert needle in names
    one_hot = next(e for e in entries if "one-hot-target-equals-draft" in e.name)
    b = build_batch(one_hot.case)
    assert torch.equal(b.target_logits[:3], b.draft_logits), "target rows equal the draft rows"
    assert all(e.case.draft_lens == [0] * len(e.case.draft_lens) for e in entries if "k0" in e.name)


def test_saved_failure_is_idempotent_and_replayable(tmp_path):
    seed_entry = degenerate_seeds()[0]
    failure = {
        "class": "id_out_of_range",
        "first_field": "output_token_ids[0,1]",
        "message": "m",
        "case": seed_entry.case.to_dict(),
    }
    a = save_failure("structural", failure, "python -m harness fuzz ...", tmp_path)
    b = save_failure("structural", dict(failure, first_field="output_token_ids[0,2]"), "cmd", tmp_path)
    assert a == b and len(list(tmp_path.iterdir())) == 1
    entry = load_entry(a)
    assert entry.properties == ["structural"] and entry.failure["class"] == "id_out_of_range"
    ctx = RunContext(PROFILES["ci"], torch.device("cpu"), 0)
    assert not replay_entry(a, ReferenceKernel(), ctx).failed


def _replay_cli(path, spec: str, *extra: str) -> subprocess.CompletedProcess:
    """``python -m harness replay PATH --seed 0 --kernel SPEC [EXTRA...]`` from the repository root."""
    args = [sys.executable, "-m", "harness", "replay", str(path), "--seed", "0", "--kernel", spec, *extra]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_replay_cli_fails_on_a_broken_kernel(tmp_path):
    entry = next(e for e in degenerate_seeds() if e.name == "degenerate-k0-all-requests")
    entry.case.draft_lens = [2, 0, 1]
    entry.case.temperatures = [1.0, 0.0, 1.0]
    path = write_entry(entry, tmp_path)
    broken = _replay_cli(path, "tests.harness.test_fuzz:PaddingDriftKernel")
    assert broken.returncode == 1 and "FAIL" in broken.stdout, broken.stdout + broken.stderr
    good = _replay_cli(path, "harness.adapters.reference_kernel:kernel")
    assert good.returncode == 0, good.stdout + good.stderr


def test_replay_cli_reports_the_ledger_mark(tmp_path):
    """The ledger of known failures (no entry carries the mark since the block-h fix): a marked entry
    keeps its mark through the file format; a failing replay names it, a passing one says to remove it."""
    entry = next(e for e in degenerate_seeds() if e.name == "degenerate-k0-all-requests")
    entry.case.draft_lens = [2, 0, 1]  # what PaddingDriftKernel gets wrong (the test above)
    entry.case.temperatures = [1.0, 0.0, 1.0]
    entry.known_failure = "test: a mark on an entry that passes"
    path = write_entry(entry, tmp_path)
    assert load_entry(path).known_failure == entry.known_failure
    broken = _replay_cli(path, "tests.harness.test_fuzz:PaddingDriftKernel")
    assert broken.returncode == 1 and "(known failure: test: a mark" in broken.stdout, broken.stdout
    good = _replay_cli(path, "harness.adapters.reference_kernel:kernel")
    assert good.returncode == 0 and "marked known_failure: remove the mark" in good.stdout, good.stdout


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
@pytest.mark.interpreter
def test_corpus_replays_clean_on_our_kernels(path):
    from harness.adapters.triton_kernels import kernel
    from kernels._device import INTERPRETING, default_device

    entry = load_entry(path)
    ctx = RunContext(
        PROFILES["ci"], default_device(), 0, kernel_spec="harness.adapters.triton_kernels:kernel"
    )
    if INTERPRETING and interpreter_cost(entry) > CPU_PROGRAM_BUDGET:
        print(
            f"{entry.name}: {interpreter_cost(entry)} interpreter programs, replayed against the oracle "
            f"on CPU; against our kernels on a GPU"
        )
        outcome = replay_entry(path, ReferenceKernel(), RunContext(PROFILES["ci"], torch.device("cpu"), 0))
    else:
        outcome = replay_entry(path, kernel, ctx)
    assert not outcome.not_applicable, outcome.not_applicable
    assert outcome.properties_run, "no property applied to the entry"
    findings = [(p, f.cls, f.first_field, f.message) for p, f in outcome.findings]
    if entry.known_failure:
        assert outcome.failed, (
            f"{entry.name} is marked known_failure but passes now: remove the mark ({entry.known_failure})"
        )
        pytest.xfail(f"known failure: {entry.known_failure}: {findings[:1]}")
    assert not outcome.failed, findings


def test_replay_reports_a_known_defect_of_that_kernel_only(tmp_path):
    """An entry classified as an outside kernel's defect: KNOWN (exit 0) on that kernel when it
    fails, an ordinary failure (exit 1) on any other kernel that fails it."""
    source = next(p for p in corpus_files() if p.name == "degenerate-target-zero-point-mass-token.json")
    data = json.loads(source.read_text())
    data["known_defects"] = {"broken.accept_all": "docs/findings/example.md#1"}
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(data))
    known = _replay_cli(path, "harness.broken.accept_all:kernel", "--in-process")
    assert known.returncode == 0 and "KNOWN   " in known.stdout and "1 known defects" in known.stdout, (
        known.stdout
    )
    other = _replay_cli(path, "harness.broken.padding_zero:kernel", "--in-process")
    assert other.returncode == 1 and "KNOWN" not in other.stdout, other.stdout
