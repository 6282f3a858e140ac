"""``bench/vs_vllm.py`` without a GPU: its ``--smoke`` path through both kernels (Triton's interpreter),
its one-line exits when vLLM or CUDA is missing, and its verdicts against issue 36's targets on rows
with known times. As in ``test_vllm_adapters.py``, the smoke test skips without vLLM except under CI.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

from bench import vs_vllm
from harness.adapters import vllm as adapter

UNAVAILABLE = adapter.vllm_available()
needs_vllm = pytest.mark.skipif(bool(UNAVAILABLE) and not os.environ.get("CI"), reason=UNAVAILABLE)
SKIPPED = "bench/vs_vllm.py: nothing measured: "


@needs_vllm
@pytest.mark.interpreter
def test_smoke_puts_both_kernels_in_every_table(tmp_path, capsys):
    out = tmp_path / "smoke.json"
    assert vs_vllm.main(["--smoke", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert not text.startswith(SKIPPED), text
    rows = json.loads(out.read_text())["rows"]
    assert [tuple(r[key] for key in vs_vllm.SHAPE_KEYS) for r in rows] == list(vs_vllm.SMOKE_SHAPES)
    assert vs_vllm.TABLE_HEADER in text
    for r in rows:
        assert r["ours_us"] > 0 and r["vllm_us"] > 0 and r["emitted_ok"], r
        assert vs_vllm.table_line(r) in text
    for heading in ("per (method, drafts, dtype)", "worst shapes", "single request,", "verdict (--smoke"):
        assert heading in text
    assert "they mean nothing about speed" in text and "floors: not measured" in text


def test_without_vllm_it_says_so_in_one_line_and_exits_0(monkeypatch, capsys):
    adapter._import_vllm.cache_clear()
    monkeypatch.setattr(adapter, "installed_version", lambda: None)
    try:
        assert vs_vllm.main(["--smoke"]) == 0
    finally:
        adapter._import_vllm.cache_clear()
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{SKIPPED}vLLM is not installed; install it with: {adapter.INSTALL_HINT}"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the exit of a machine without CUDA")
def test_without_cuda_it_says_so_in_one_line_and_exits_0(capsys):
    assert vs_vllm.main(["--quick"]) == 0
    assert capsys.readouterr().out.splitlines() == [SKIPPED + vs_vllm.NO_CUDA]


def _row(reqs, method, speedup, x_floor=1.0, ours_us=100.0, vocab=32000, k=4):
    shape = (reqs, k, vocab, "fp32", method, "logits")
    times = dict(ours_us=ours_us, vllm_us=ours_us * speedup, emitted_ok=True)
    floor = ours_us / x_floor
    parts = dict(read=0.75 * floor, noise=0.25 * floor, after_reads=floor)
    return vs_vllm.shape_row(shape, times, 4e12, parts)


def test_verdicts_follow_the_targets(tmp_path, capsys):
    rows = [
        _row(128, "token", 1.6), _row(512, "token", 1.7), _row(512, "token", 1.25, x_floor=1.35, k=8),  # pass
        _row(128, "block", 1.6), _row(512, "block", 1.6), _row(512, "block", 1.1, k=8),  # one below 1.2x
        _row(16, "block", 0.5),  # under 128 requests: in no group
        _row(1, "token", 1.0, ours_us=30.0), _row(1, "block", 1.0, ours_us=50.0),  # V 32000: 40 / 50 us
        _row(1, "token", 1.0, ours_us=70.0, vocab=262144),  # over 60 us
    ]
    groups = {g["method"]: g for g in vs_vllm.group_summary(rows, vs_vllm.BIG_REQUESTS)}
    assert (groups["token"]["ok"], groups["block"]["ok"]) == (True, False)
    assert (groups["block"]["n"], groups["block"]["min_x"]) == (3, pytest.approx(1.1))
    singles = {s["vocab"]: s for s in vs_vllm.single_summary(rows)}
    assert (singles[32000]["ours_median"], singles[32000]["ok"], singles[262144]["ok"]) == (40.0, True, False)
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(dict(schema=vs_vllm.SCHEMA, smoke=False, device="test", torch="-", vllm="-",
                                    rows=rows)))
    assert vs_vllm.main(["--from-json", str(path)]) == 0
    text = capsys.readouterr().out
    assert "speed-up over vLLM at >= 128 requests: FAIL (1 of 2 groups" in text
    assert "shapes over 1.3x their floor (read + noise), worst first: 1 of 6" in text
    assert "512x8x32000 fp32 token logits: 1.35x" in text
    assert "within 1.3x of the floor at >= 128 requests: FAIL (5 of 6 shapes)" in text
    assert "single request: FAIL (1 of 2 vocabularies)" in text
