"""Triton's function hash of each launched kernel is the same in a prewarm process and in check's worker.

A prewarmed binary is found only if the process that launches computes the same on-disk cache key,
``JITFunction.cache_key`` included (kernels/function_hashes.py). The probe (tests/kernels/hash_probe.py)
runs in a fresh interpreter with ``TRITON_INTERPRET=0`` (JIT functions, no GPU needed) and hashes
the kernels in opposite orders in the two processes. ``triton-3.6-order`` makes every process hash
as Triton 3.6 does (tests/kernels/triton36_hash_order/), so the test fails without
``function_hashes.settle`` whichever Triton is installed; ``installed-triton`` uses Triton as it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EMULATION = Path(__file__).resolve().parent / "triton36_hash_order"


@pytest.mark.parametrize("order", ["installed-triton", "triton-3.6-order"])
def test_launched_kernels_hash_alike_in_prewarm_and_check_processes(order):
    env = dict(os.environ, TRITON_INTERPRET="0")
    paths = [str(ROOT)] + ([str(EMULATION)] if order == "triton-3.6-order" else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
    run = subprocess.run([sys.executable, "-m", "tests.kernels.hash_probe"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    found = json.loads(run.stdout)
    spawned, worker = found["spawned"], found["worker"]
    assert len(spawned) >= 8 and set(spawned) == set(worker), (sorted(spawned), sorted(worker))
    assert list(spawned) != list(worker), "the two processes must hash in different orders"
    differing = sorted(name for name in spawned if spawned[name] != worker[name])
    assert not differing, f"function hash differs between a prewarm process and check's worker: {differing}"
    conflicts = found["conflicts"]
    assert not conflicts, f"rename these constexpr globals (hash_probe.conflicting_globals): {conflicts}"
