"""False-alarm calibration (harness/campaigns/calibrate.py): the tally, and a verdict that can fail.

The verdict is exercised on synthetic p-values (uniform: calibrated; piled up near 0: miscalibrated;
too many rejections for the stated alpha: miscalibrated), and one short real run checks the plumbing
on the float64 oracle wrapped as a kernel.
"""

from __future__ import annotations

import numpy as np
import torch

from harness.adapters.reference_kernel import ReferenceKernel
from harness.campaigns.calibrate import PropertyCalibration, calibrate, statistical_properties, verdict
from harness.profiles import PROFILES


def synthetic(p_values, alpha=1e-6, rejections=0) -> dict:
    t = PropertyCalibration(
        "law",
        runs=len(p_values),
        p_values=list(p_values),
        alphas=[alpha] * len(p_values),
        first_stage_rejections=rejections,
    )
    return t.summary()


def test_uniform_p_values_are_calibrated():
    rng = np.random.default_rng(5)
    ok, reasons = verdict([synthetic(rng.random(2000))], tail_alpha=1e-3)
    assert ok, reasons


def test_excess_of_small_p_values_is_flagged():
    rng = np.random.default_rng(6)
    p = np.concatenate([rng.random(1800), rng.random(200) * 0.005])
    ok, reasons = verdict([synthetic(p)], tail_alpha=1e-3)
    assert not ok and any("below 0.01" in r for r in reasons)


def test_rejections_beyond_the_alpha_budget_are_flagged():
    summary = synthetic(np.full(100, 0.5), alpha=1e-6, rejections=2)
    assert summary["rejection_tail_p"] < 1e-8
    ok, reasons = verdict([summary], tail_alpha=1e-3)
    assert not ok and "rejections where at most" in reasons[0]


def test_short_real_run_collects_every_assertion():
    props = [p for p in statistical_properties(["conditional_law"])]
    tallies = calibrate(
        ReferenceKernel(),
        "harness.adapters.reference_kernel:kernel",
        PROFILES["ci"],
        torch.device("cpu"),
        root_seed=11,
        runs=2,
        properties=props,
        max_samples=4000,
        progress=lambda s: None,
    )
    t = tallies["conditional_law"]
    assert t.runs == 2 and t.errors == 0 and len(t.p_values) == len(t.alphas) > 0
    assert all(0.0 <= p <= 1.0 for p in t.p_values) and all(0 < a < 1e-3 for a in t.alphas)
    assert t.first_stage_rejections == 0


def _shard(tmp_path, name, seed, p_values, rejections):
    import json
    from dataclasses import asdict

    tally = PropertyCalibration("conditional_law", runs=len(p_values), p_values=list(p_values),
                                alphas=[1e-7] * len(p_values), first_stage_rejections=rejections)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "calibration.json").write_text(json.dumps({
        "kernel": "k", "profile": "ci", "device": "cuda:0", "seed": seed, "runs": len(p_values),
        "raw": {"conditional_law": asdict(tally)}}))
    return str(folder)


def test_merged_shards_pool_every_assertion_and_refuse_shared_seeds(tmp_path):
    import pytest

    from harness.campaigns.calibrate import merge_tallies

    a = _shard(tmp_path, "a", 1, [0.5, 0.25], 0)
    b = _shard(tmp_path, "b", 2, [0.75], 1)
    tallies, header = merge_tallies([a, b])
    pooled = tallies["conditional_law"]
    assert pooled.p_values == [0.5, 0.25, 0.75] and pooled.first_stage_rejections == 1 and pooled.runs == 3
    assert header["runs"] == 3 and header["seed"] == [1, 2]
    ok, reasons = verdict([pooled.summary()], 1e-3)
    assert not ok and "rejections where at most" in reasons[0]  # 1 rejection against 3e-7 expected
    with pytest.raises(ValueError, match="share a root seed"):
        merge_tallies([a, _shard(tmp_path, "c", 1, [0.5], 0)])
