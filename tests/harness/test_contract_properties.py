"""The per-case properties (layers 1, 2, 3, 5) against the kernel under test (``pytest --kernel SPEC``).

Default kernel: our Triton kernels (interpreted on CPU). Every property the kernel claims must pass;
unclaimed ones are skipped with the reason, never counted as passed.
"""

from __future__ import annotations

import pytest

from harness.properties import REGISTRY
from harness.properties.base import NOT_CLAIMED, PASS
from harness.properties.case_property import CaseProperty

CASE_PROPERTIES = [name for name, prop in REGISTRY.items() if isinstance(prop, CaseProperty)]


@pytest.mark.interpreter
@pytest.mark.parametrize("name", CASE_PROPERTIES)
def test_kernel_under_test_holds(name, kernel_under_test, run_context):
    result = REGISTRY[name].run(kernel_under_test, run_context)
    if result.verdict == NOT_CLAIMED:
        pytest.skip(f"not claimed: {result.note}")
    detail = (
        "\n".join(
            f"{f.cls} @ {f.first_field}: {f.message}\n  case: {f.case}\n  repro: {f.repro}"
            for f in result.failures
        )
        or result.note
    )
    assert result.verdict == PASS, detail
