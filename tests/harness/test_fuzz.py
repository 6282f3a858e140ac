"""The fuzz campaign: deterministic shards, budget, guidance, dedup + shrink, corpus saving, CLI.

Kernels used: the float64 oracle wrapped as a kernel (correct) and ``PaddingDriftKernel`` below, the
oracle with BUGS.md class 18 planted (the first padding slot of every request that has one is written
as token 0 instead of -1). Both run on CPU without Triton, so these tests are fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.adapters.reference_kernel import ReferenceKernel
from harness.campaigns.corpus import load_entry, replay_entry
from harness.campaigns.fuzz import (
    Campaign,
    UsageError,
    guidance_scores,
    measure_acceptance,
    parse_duration,
    parse_shard,
    select_properties,
    work_items,
)
from harness.contract import VerifyOutput
from harness.generation.cases import Case
from harness.profiles import PROFILES
from harness.properties.base import RunContext

REPO = Path(__file__).resolve().parents[2]
REFERENCE = "harness.adapters.reference_kernel:kernel"
BROKEN = "tests.harness.test_fuzz:PaddingDriftKernel"


class PaddingDriftKernel(ReferenceKernel):
    """Correct decisions, but the first padding slot holds 0 instead of -1 (BUGS.md #18)."""

    name = "padding-drift"

    def verify(self, batch) -> VerifyOutput:
        out = super().verify(batch)
        ids = out.output_token_ids.clone()
        for r, n in enumerate(out.num_emitted.tolist()):
            if n < ids.shape[1]:
                ids[r, n] = 0
        return VerifyOutput(ids, out.num_emitted, out.logprobs)


def test_durations_and_shards_parse_or_refuse():
    assert parse_duration("90") == 90 and parse_duration("15m") == 900 and parse_duration("1h30m") == 5400
    assert parse_duration("2.5s") == 2.5
    for bad in ("", "soon", "0s", "-5"):
        with pytest.raises(UsageError):
            parse_duration(bad)
    assert parse_shard("3/4") == (3, 4)
    for bad in ("4/4", "1", "a/b", "0/0"):
        with pytest.raises(UsageError):
            parse_shard(bad)


def take(gen, n):
    return [next(gen) for _ in range(n)]


def test_shards_split_the_work_disjointly_and_deterministically():
    names = ["c", "a", "b"]
    single = take(work_items(names, (0, 1)), 24)
    shards = [take(work_items(names, (i, 4)), 6) for i in range(4)]
    assert sorted(x for s in shards for x in s) == sorted(single)
    assert len({x for s in shards for x in s}) == 24
    assert take(work_items(names, (2, 4)), 6) == shards[2]
    assert single[:3] == [(0, "a"), (0, "b"), (0, "c")]


def test_guidance_rewards_near_ties_and_size():
    case = Case(vocab_size=1024, draft_lens=[3, 1], temperatures=[1.0, 1.0], seeds=[1, 2], positions=[0, 0])
    near = guidance_scores(case, lambda c: [0.5, -1e-9, float("nan")])
    far = guidance_scores(case, lambda c: [0.5, 0.2])
    assert near["tie_closeness"] == pytest.approx(9.0) and far["tie_closeness"] < 1
    assert near["log2_vocab"] == 10 and near["draft_tokens"] == 4 and near["requests"] == 2
    assert "tie_closeness" not in guidance_scores(case, None)


def campaign(kernel, spec, tmp_path, **kw) -> Campaign:
    claimed, _ = select_properties(kernel, ["structural"])
    lines = []
    c = Campaign(
        kernel,
        spec,
        PROFILES["ci"],
        torch.device("cpu"),
        seed=1234,
        shard=(0, 1),
        budget_s=60.0,
        properties=claimed,
        corpus_dir=tmp_path / "corpus",
        command="pytest",
        log=lines.append,
        **kw,
    )
    c.lines = lines
    return c


def test_correct_kernel_passes_with_coverage(tmp_path):
    c = campaign(ReferenceKernel(), REFERENCE, tmp_path, max_items=2)
    seconds = c.run()
    report = c.report("2026-11-29T00:00:00+00:00", seconds, {})
    (prop,) = report["properties"]
    assert prop["verdict"] == "pass" and prop["cases"] >= 2 * PROFILES["ci"].max_examples // 2
    assert report["schema"] == "specfuzz-report/1" and report["shard"] == "0/1" and report["seed"] == 1234
    assert len(report["coverage"]["vocab_size"]) == prop["cases"]
    assert report["cases_per_hour"] > 0 and not c.saved


def test_broken_kernel_failure_is_deduplicated_shrunk_saved_and_replayable(tmp_path):
    c = campaign(PaddingDriftKernel(), BROKEN, tmp_path, max_items=3)
    c.run()
    report = c.report("2026-11-29T00:00:00+00:00", 1.0, {})
    (prop,) = report["properties"]
    assert prop["verdict"] == "fail"
    keys = [(f["class"], f["first_field"].split("[")[0]) for f in prop["failures"]]
    assert len(keys) == len(set(keys)) >= 1, "one entry per (class, field)"
    first = prop["failures"][0]
    case = first["case"]
    assert len(case["draft_lens"]) <= 2 and case["vocab_size"] <= 8, f"not shrunk: {case}"
    assert "python -m harness replay" in first["repro"]
    assert len(c.saved) == len(prop["failures"])
    saved = Path(c.saved[0])
    assert load_entry(saved).properties == ["structural"]
    ctx = RunContext(PROFILES["ci"], torch.device("cpu"), 0)
    assert replay_entry(saved, PaddingDriftKernel(), ctx).failed
    assert not replay_entry(saved, ReferenceKernel(), ctx).failed
    assert any("NEW FAILURE" in line for line in c.lines)


def test_fuzz_cli_writes_reports_and_exit_code(tmp_path):
    out = tmp_path / "rep"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "fuzz",
            "--kernel",
            BROKEN,
            "--budget",
            "60s",
            "--profile",
            "ci",
            "--only",
            "structural",
            "--max-items",
            "1",
            "--seed",
            "7",
            "--shard",
            "1/3",
            "--report",
            str(out),
            "--corpus",
            str(tmp_path / "corpus"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["seed"] == 7 and report["shard"] == "1/3" and report["budget_s"] == 60
    assert "--seed 7" in report["command"]
    assert 'class="failure"' in (out / "report.html").read_text()
    assert list((tmp_path / "corpus").glob("structural-*.json"))


def test_acceptance_on_the_toy_example_matches_the_exact_law():
    measured = measure_acceptance(ReferenceKernel(), torch.device("cpu"), seed=3, requests=20000)
    for method, exact in measured["acceptance_exact"].items():
        got = measured["acceptance"][method]
        # 5 standard errors of a proportion near 1/2 at n = 20000 is 0.018.
        assert max(abs(a - b) for a, b in zip(got, exact, strict=True)) < 0.018, (method, got, exact)
    assert set(measured["acceptance"]) == {"token", "block"} and measured["acceptance_n"] == 20000


def test_parallel_local_shards_merge_into_one_report(tmp_path):
    out = tmp_path / "rep"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "fuzz",
            "--kernel",
            REFERENCE,
            "--budget",
            "60s",
            "--profile",
            "ci",
            "--only",
            "structural",
            "--only",
            "logit_shift",
            "--max-items",
            "1",
            "--seed",
            "9",
            "--parallel",
            "2",
            "--report",
            str(out),
            "--no-save",
            "--acceptance-requests",
            "0",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = json.loads((out / "report.json").read_text())
    assert (
        merged["shard"] == "merged 0/2,1/2" and merged["shards_missing"] == [] and merged["seeds"] == [9, 9]
    )
    assert {p["name"] for p in merged["properties"]} == {"structural", "logit_shift"}
    assert (out / "shard-0" / "report.json").exists() and (out / "report.html").exists()


def test_stop_on_failure_ends_the_campaign_and_times_the_failure(tmp_path):
    c = campaign(PaddingDriftKernel(), BROKEN, tmp_path, max_items=50, stop_on_failure=True)
    c.run()
    assert c.items_done == 1
    (failure,) = c.report("t", 1.0, {})["properties"][0]["failures"]
    assert 0 < failure["found_after_s"] < 60


def test_a_statistical_item_that_would_outlast_the_budget_is_skipped_not_run(tmp_path, monkeypatch):
    """A statistical item gets the campaign's deadline: projected at 30 s of kernel time (inside the ci
    profile's own 30 s) with a 5 s campaign budget, it must be skipped at once and say so; before
    this it ran whole, far past the budget."""
    from harness.properties import statistical

    monkeypatch.setattr(statistical, "projected_seconds", lambda *a, **k: 30.0)
    claimed, _ = select_properties(ReferenceKernel(), ["conditional_law"])
    c = campaign(ReferenceKernel(), REFERENCE, tmp_path, max_items=1)
    c.properties, c.budget_s = claimed, 5.0
    seconds = c.run()
    (prop,) = c.report("2026-12-04T00:00:00+00:00", seconds, {})["properties"]
    assert prop["verdict"] == "skipped" and prop["cases"] == 0, prop
    assert prop["note"].startswith("skipped for budget: not started") and seconds < 5.0, prop["note"]
