"""vLLM 0.33.0, the release before the current one, beside it: CI installs its Python code into a
directory of its own (``SPECFUZZ_VLLM_033_SITE``, .ci/run) and these tests run the adapter on it in a
subprocess whose ``PYTHONPATH`` puts that directory first, so one CI run covers both releases.

Checked there: the uniform probes of test_vllm_adapters.py (the adapter's ``random_draws`` are 0.33's
own uniforms too), ``skip_masked_vocab_blocks`` and V1 skip as 0.33 requires, and the regression
corpus replays with the three classified MRV2 defects reproduced (docs/findings/vllm-0.33.md).
Without the directory the tests skip, except under CI, where that is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = os.environ.get("SPECFUZZ_VLLM_033_SITE", "")
needs_site = pytest.mark.skipif(
    not SITE and not os.environ.get("CI"),
    reason="SPECFUZZ_VLLM_033_SITE is not set (pip install --no-deps --target DIR vllm==0.33.0)",
)


def _run(*argv: str) -> subprocess.CompletedProcess:
    assert SITE, "CI must install vLLM 0.33.0 into SPECFUZZ_VLLM_033_SITE (.ci/run)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), SITE])}
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


@needs_site
def test_033_is_what_the_subprocess_imports():
    done = _run("-c", "from harness.adapters import vllm as a; a._import_vllm(); print(a.mrv2.name)")
    assert done.returncode == 0 and done.stdout.split()[-1] == "vllm-0.33-mrv2", done.stdout + done.stderr


@needs_site
def test_033_follows_the_uniforms_the_adapter_reports():
    done = _run("-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                "tests/harness/test_vllm_adapters.py", "-k", "uniforms or skip_masked or mapping or removed")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout or "passed" in done.stdout, done.stdout[-1000:]


@needs_site
def test_033_reproduces_its_classified_defects():
    entries = sorted(str(p) for p in (ROOT / "tests" / "regressions").glob("vllm-mrv2-*.json"))
    done = _run("-m", "harness", "replay", *entries, "--kernel", "harness.adapters.vllm:mrv2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{len(entries)} known defects of this kernel reproduced" in done.stdout, done.stdout[-2000:]
