"""Merging shard reports: worst verdict wins, counts add, failures deduplicate, alpha is a union bound."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.campaigns.merge import MergeError, failure_key, merge_reports

REPO = Path(__file__).resolve().parents[2]


def shard_report(shard: str, seed: int, verdict: str = "pass", failures=(), cases: int = 10) -> dict:
    return {
        "schema": "specfuzz-report/1",
        "command": "python -m harness fuzz",
        "kernel": "k:k",
        "profile": "nightly",
        "device": "cpu",
        "seed": seed,
        "shard": shard,
        "started": f"2026-11-29T16:0{seed % 10}:00Z",
        "duration_s": 10.0 + seed,
        "versions": {"torch": "2.13"},
        "commit": "abc",
        "family_wise_alpha": 1e-6,
        "properties": [
            {
                "name": "structural",
                "layer": 1,
                "verdict": "pass",
                "cases": cases,
                "seconds": 1.0,
                "ties": 0,
                "statistics": [],
                "failures": [],
            },
            {
                "name": "coupled_exactness",
                "layer": 2,
                "verdict": verdict,
                "cases": cases,
                "seconds": 2.0,
                "ties": 1,
                "statistics": [
                    {
                        "name": "s",
                        "n": 5,
                        "cells": 2,
                        "statistic": 1.0,
                        "p_value": 0.5,
                        "alpha": 1e-7,
                        "power": 0.999,
                        "detectable_tv": 0.1,
                    }
                ],
                "failures": list(failures),
            },
        ],
        "coverage": {"vocab_size": [2, 3], "method": ["token"]},
        "acceptance": {"token": [0.5, 0.5]},
    }


def mismatch(field: str, case_len: int) -> dict:
    return {
        "class": "coupled_mismatch",
        "first_field": field,
        "message": "m",
        "case": {"vocab_size": case_len, "pad": "x" * case_len},
        "evidence": {},
        "repro": "r",
    }


def test_merge_adds_counts_and_keeps_worst_verdict():
    merged = merge_reports(
        [
            shard_report("0/3", 1),
            shard_report("1/3", 2, "fail", [mismatch("ids[0,1]", 5)]),
            shard_report("2/3", 3, "error"),
        ]
    )
    props = {p["name"]: p for p in merged["properties"]}
    assert props["coupled_exactness"]["verdict"] == "fail"
    assert props["structural"]["verdict"] == "pass"
    assert props["coupled_exactness"]["cases"] == 30 and props["coupled_exactness"]["ties"] == 3
    assert len(props["coupled_exactness"]["statistics"]) == 3
    assert merged["family_wise_alpha"] == pytest.approx(3e-6)
    assert merged["duration_s"] == 13.0 and merged["seeds"] == [1, 2, 3]
    assert merged["shards_missing"] == []
    assert merged["coverage"]["vocab_size"] == [2, 3, 2, 3, 2, 3]
    assert merged["acceptance"]["token"] == pytest.approx([0.5, 0.5])


def test_failures_deduplicate_by_property_class_and_field_keeping_smallest_case():
    big, small, other = (
        mismatch("output_token_ids[3,1]", 50),
        mismatch("output_token_ids[0,0]", 2),
        mismatch("num_emitted[1]", 9),
    )
    merged = merge_reports(
        [shard_report("0/2", 1, "fail", [big]), shard_report("1/2", 2, "fail", [small, other])]
    )
    failures = merged["properties"][1]["failures"]
    assert len(failures) == 2
    ids = next(f for f in failures if f["first_field"].startswith("output_token_ids"))
    assert ids["case"]["vocab_size"] == 2 and ids["occurrences"] == 2
    assert failure_key("p", big) == failure_key("p", small) != failure_key("p", other)


def test_missing_shards_and_duplicates_are_reported():
    merged = merge_reports([shard_report("0/4", 1), shard_report("2/4", 2), shard_report("2/4", 2)])
    assert merged["shards_missing"] == [1, 3]
    assert any("appears 2 times" in w for w in merged["merge_warnings"])


def test_refuses_different_kernels_and_schemas():
    other = shard_report("1/2", 2)
    other["kernel"] = "x:y"
    with pytest.raises(MergeError, match="different kernels"):
        merge_reports([shard_report("0/2", 1), other])
    bad = shard_report("0/1", 1)
    bad["schema"] = "v0"
    with pytest.raises(MergeError, match="schema"):
        merge_reports([bad])


def test_merge_cli_writes_json_and_html_and_exit_code(tmp_path):
    for i, verdict in enumerate(("pass", "fail")):
        d = tmp_path / f"shard{i}"
        d.mkdir()
        failures = [mismatch("ids[0]", 3)] if verdict == "fail" else []
        (d / "report.json").write_text(json.dumps(shard_report(f"{i}/2", i, verdict, failures)))
    out = tmp_path / "merged"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.campaigns.merge",
            str(tmp_path / "shard0"),
            str(tmp_path / "shard1"),
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    merged = json.loads((out / "report.json").read_text())
    assert merged["shard"] == "merged 0/2,1/2"
    assert 'id="failures"' in (out / "report.html").read_text()
