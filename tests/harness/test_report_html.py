"""The HTML report: built from a schema-conformant report, rendered in headless chromium.

The browser test loads the page with a probe script appended (the report itself ships no scripts),
waits for ``load`` and reads back from the DOM how many plots decoded to real images and which
sections are laid out with non-zero height. It skips only when no chromium binary exists, and says so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from harness.reporting.report_html import (
    coverage_counts,
    mismatch_index,
    overall_verdict,
    render_html,
    shown_verdict,
    write_html,
)


def sample_report() -> dict:
    """A report with one coupled mismatch, one statistical failure, coverage and acceptance data."""
    stat = {
        "name": "conditional_law[tau,Y] V=4 g=2",
        "n": 200000,
        "cells": 6,
        "statistic": 812.5,
        "p_value": 1e-170,
        "alpha": 1e-7,
        "power": 0.999,
        "detectable_tv": 0.01,
        "rejected": True,
        "confirmed": True,
        "observed": [66000, 22000, 40000, 36000, 20000, 16000],
        "expected": [0.333, 0.111, 0.2, 0.2, 0.1, 0.056],
        "labels": ["|b", "b|b", "aa|a", "aa|b", "ab|a", "ab|b"],
    }
    return {
        "schema": "specfuzz-report/1",
        "command": "python -m harness fuzz --kernel harness.adapters.triton_kernels:kernel --budget 1h "
        "--shard 0/2",
        "kernel": "harness.adapters.triton_kernels:kernel",
        "profile": "nightly",
        "device": "cuda:0 NVIDIA H200",
        "seed": 123,
        "shard": "0/2",
        "started": "2026-11-29T16:00:00Z",
        "duration_s": 3600.2,
        "budget_s": 3600,
        "versions": {
            "python": "3.12",
            "torch": "2.11",
            "triton": "3.6",
            "numpy": "2.5",
            "hypothesis": "6.155",
        },
        "commit": "abc1234",
        "family_wise_alpha": 1e-6,
        "properties": [
            {
                "name": "structural",
                "layer": 1,
                "verdict": "pass",
                "cases": 500,
                "seconds": 12.0,
                "ties": 0,
                "statistics": [],
                "failures": [],
            },
            {
                "name": "coupled_exactness",
                "layer": 2,
                "verdict": "fail",
                "cases": 40,
                "seconds": 30.0,
                "ties": 2,
                "statistics": [],
                "failures": [
                    {
                        "class": "coupled_mismatch",
                        "first_field": "output_token_ids[1,2]",
                        "message": "kernel emitted 5, oracle 7 (margin 0.31, tie band 1e-6)",
                        "case": {"vocab_size": 8, "method": "block", "target_logits": [[0.1] * 8] * 3},
                        "evidence": {
                            "margins": [0.2, -0.05, 0.31, 1e-8],
                            "tie_margin": 1e-6,
                            "mismatch_index": [2],
                            "kernel": 5,
                            "oracle": 7,
                        },
                        "repro": "python -m harness replay tests/regressions/x.json --kernel k:k",
                    }
                ],
            },
            {
                "name": "conditional_law",
                "layer": 4,
                "verdict": "fail",
                "cases": 3,
                "seconds": 50.0,
                "ties": 0,
                "statistics": [stat],
                "failures": [
                    {
                        "class": "law_rejected",
                        "first_field": "Y|tau=1",
                        "message": "G = 812 <script>x</script>",
                        "case": {"vocab_size": 2},
                        "evidence": {},
                        "repro": "python -m harness check ...",
                    }
                ],
            },
            {
                "name": "logprobs",
                "layer": 1,
                "verdict": "not claimed",
                "cases": 0,
                "seconds": 0.0,
                "ties": 0,
                "statistics": [],
                "failures": [],
            },
        ],
        "coverage": {
            "vocab_size": [1, 2, 111, 8193, 8193, 151936],
            "draft_len": [0, 1, 4, 4, 16],
            "temperature_band": ["greedy", "tiny", "normal"],
            "family": ["gaussian", "one_hot"],
            "chunk_budget": [1, 4096, "unbounded"],
            "dtype": ["float32", "bfloat16"],
            "method": ["token", "block"],
        },
        "acceptance": {"token": [1 / 3, 2 / 9, 4 / 9], "block": [1 / 3, 1 / 9, 5 / 9]},
    }


def test_page_has_every_section_and_plot():
    page = render_html(sample_report())
    for section in ("run-header", "summary", "coverage", "acceptance", "statistics", "failures"):
        assert f'id="{section}"' in page, section
    plots = set(re.findall(r'data-plot="([^"]+)"', page))
    assert {
        "coverage-vocab_size",
        "coverage-draft_len",
        "coverage-temperature_band",
        "coverage-family",
        "coverage-chunk_budget",
        "coverage-dtype",
        "coverage-method",
        "acceptance",
    } <= plots
    assert "margins-coupled_exactness-coupled_mismatch" in plots
    assert any(p.startswith("law-conditional_law") for p in plots)
    assert page.count('class="failure"') == 2
    assert "python -m harness replay tests/regressions/x.json" in page
    assert "abc1234" in page and "NVIDIA H200" in page and "3600 s" in page
    assert "<script>x</script>" not in page, "messages must be escaped"


def test_empty_report_renders_without_plots():
    page = render_html({"schema": "specfuzz-report/1", "properties": []})
    assert "No failures." in page and "No coverage recorded." in page
    assert 'data-plot="' not in page


def test_overall_verdict_prefers_fail_then_error():
    mk = lambda *vs: {"properties": [{"verdict": v} for v in vs]}
    assert overall_verdict(mk("pass", "error", "fail")) == "fail"
    assert overall_verdict(mk("pass", "error")) == "error"
    assert overall_verdict(mk("pass", "not claimed")) == "pass"
    assert overall_verdict(mk("not claimed")) == "not claimed"


def test_coverage_bins_vocab_by_powers_of_two_and_accepts_counts():
    c = coverage_counts([1, 2, 3, 8193, 8193], "vocab_size")
    assert c["2^0..2^1"] == 1 and c["2^1..2^2"] == 2 and c["2^13..2^14"] == 2
    assert coverage_counts({"token": 3, "block": 4}, "method") == {"token": 3, "block": 4}


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.querySelectorAll('img.plot'));
  document.body.dataset.plots = imgs.length;
  document.body.dataset.decoded =
    imgs.filter(i => i.complete && i.naturalWidth > 50 && i.naturalHeight > 50).length;
  const ids = ['run-header','summary','coverage','acceptance','statistics','failures'];
  document.body.dataset.visible = ids.filter(id => { const e = document.getElementById(id);
    return e && e.getBoundingClientRect().height > 10; }).join(',');
  document.body.dataset.probe = 'done';
});
</script></body>"""


def test_report_renders_in_headless_chromium(tmp_path):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip(
            "NO CHROMIUM BINARY: the browser rendering of report.html is NOT tested "
            "(install it: apt-get install -y chromium)"
        )
    page = write_html(sample_report(), tmp_path / "report.html")
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE))
    proc = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = proc.stdout
    assert 'data-probe="done"' in dom, f"probe did not run; chromium stderr:\n{proc.stderr[-2000:]}"
    n_plots = int(re.search(r'data-plots="(\d+)"', dom).group(1))
    n_decoded = int(re.search(r'data-decoded="(\d+)"', dom).group(1))
    visible = re.search(r'data-visible="([^"]*)"', dom).group(1).split(",")
    assert n_plots >= 10 and n_decoded == n_plots, (n_plots, n_decoded)
    assert set(visible) == {"run-header", "summary", "coverage", "acceptance", "statistics", "failures"}
    # The page round-trips the JSON it came from: the minimal case is shown verbatim.
    assert json.dumps(8) in dom and "coupled_mismatch" in dom


def test_mismatch_index_falls_back_to_first_differing_token():
    assert mismatch_index({"mismatch_index": [3]}) == [3]
    assert mismatch_index({"kernel_tokens": [4, 1, 7], "reference_tokens": [4, 2]}) == [1]
    assert mismatch_index({"kernel_tokens": [4], "reference_tokens": [4, 2]}) == [1]
    assert mismatch_index({}) == []


def test_a_pass_that_ran_nothing_is_not_shown_as_pass():
    assert shown_verdict({"verdict": "pass", "cases": 0, "statistics": []}) == "nothing run"
    assert shown_verdict({"verdict": "pass", "cases": 0, "statistics": [{"name": "s"}]}) == "pass"
    assert shown_verdict({"verdict": "fail", "cases": 0}) == "fail"
    page = render_html({"properties": [{"name": "marginal_law", "layer": 4, "verdict": "pass", "cases": 0}]})
    assert "nothing run" in page
