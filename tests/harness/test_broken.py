"""Proof of teeth: every deliberately broken kernel of ``harness.broken`` FAILS, and the property its
catalogue entry names first is one that catches it.

CI (fast): each broken kernel is run against its first expected property alone (fail-fast), on the
CPU with the ``ci`` profile. The full ``python -m harness check --profile ci`` of every broken kernel
(all properties in registry order) and 20 seeds of the correct kernels are in ``bench/teeth.py`` and
the ``slow`` test below.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import torch

from harness.broken import CATALOGUE, NAMES
from harness.plugins import load_kernel, protocol_problems
from harness.profiles import PROFILES
from harness.properties.base import FAIL, REGISTRY, RunContext


def test_catalogue_is_large_named_and_documented():
    assert len(CATALOGUE) >= 15 and len(set(NAMES)) == len(NAMES)
    for entry in CATALOGUE:
        module = importlib.import_module(f"harness.broken.{entry.name}")
        doc = module.__doc__ or ""
        assert "BUGS.md class" in doc or "Invented" in doc, entry.name
        assert "Expected catcher" in doc and f"``{entry.expected[0]}``" in doc, entry.name
        assert all(name in REGISTRY for name in entry.expected), (entry.name, entry.expected)
        kernel = load_kernel(entry.spec)
        assert not protocol_problems(kernel) and kernel.name == f"broken.{entry.name}"


WRONG_ANSWERS = [e for e in CATALOGUE if not e.fault]  # the faulting ones: tests/harness/test_faults.py


@pytest.mark.parametrize("entry", WRONG_ANSWERS, ids=[e.name for e in WRONG_ANSWERS])
def test_first_expected_property_catches_the_broken_kernel(entry):
    kernel = load_kernel(entry.spec)
    ctx = RunContext(PROFILES["ci"], torch.device("cpu"), seed=0, kernel_spec=entry.spec, fail_fast=True)
    # Teeth, not speed, are under test: a loaded machine (pytest -n auto on 32 cores) must not turn the
    # statistical property into a "too slow" skip. Its real cost here is about a minute.
    ctx.extra["stat_seconds_per_property"] = 1800.0
    result = REGISTRY[entry.expected[0]].run(kernel, ctx)
    assert result.verdict == FAIL, (entry.name, result.verdict, result.note)
    assert result.failures and result.failures[0].message


@pytest.mark.slow
@pytest.mark.parametrize("name", ["block_uses_token_residual", "padding_zero"])
def test_cli_check_fails_a_broken_kernel_and_names_the_property(name):
    spec = f"harness.broken.{name}:kernel"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "check",
            "--kernel",
            spec,
            "--profile",
            "ci",
            "--device",
            "cpu",
            "--fail-fast",
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    expected = next(e for e in CATALOGUE if e.name == name).expected
    assert any(f"{p}" in proc.stdout for p in expected)
