"""The standalone scripts of the upstream reports (docs/findings/upstream-*.md) keep showing their
defects: vLLM's MRV2 kernels are Triton, so on a CPU they run under the interpreter, and each script
of a defect that the interpreter reproduces must fail its own assertion (the report says what that
assertion checks). The NaN-row report is GPU-only (the interpreter's argmax differs); FlashInfer's and
SGLang's need CUDA."""

from __future__ import annotations

import pytest

from bench.engine_repros import run_upstream_script, upstream_reports

CPU_REPRODUCED = ("empty-float32-residual-token-0", "residual-near-one-hot-mode", "block-h-below-epsilon")


def test_every_upstream_report_has_a_script():
    reports = upstream_reports()
    assert len(reports) >= 7
    for report in reports:
        assert "```python\n" in report.read_text(), report.name


@pytest.mark.parametrize("name", CPU_REPRODUCED)
def test_vllm_report_scripts_fail_their_assertion(name):
    pytest.importorskip("vllm")
    from harness.adapters import vllm

    if vllm.vllm_available():
        pytest.skip(f"vLLM not usable here: {vllm.vllm_available()}")
    (report,) = upstream_reports([f"upstream-vllm-0.34-{name}"])
    rc, text, own_assert = run_upstream_script(report, timeout=300)
    assert own_assert, f"{report.name}: exit {rc}, the defect was not shown:\n{text[-1500:]}"
