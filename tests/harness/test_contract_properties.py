"""Every registered property against the kernel under test (``pytest --kernel SPEC``).

Default kernel: our Triton kernels (interpreted on CPU). Every property the kernel claims must pass;
unclaimed ones, and statistical ones the profile cannot afford on this device (verdict ``skipped``),
are skipped with the reason, never counted as passed. A kernel at the interpreter's speed (over
``SUITE_SECONDS_PER_REQUEST`` in the statistical pilot) would run the statistical properties
time-sized, ~35 s each (issue 44): the suite leaves that to ``python -m harness check`` (the main job, which
runs them once; CI time) and skips them here with that reason.
"""

from __future__ import annotations

import pytest

from harness.properties import REGISTRY
from harness.properties.base import NOT_CLAIMED, PASS, SKIPPED
from harness.properties.case_property import CaseProperty
from harness.properties.statistical import kernel_cost

CASE_PROPERTIES = [name for name, prop in REGISTRY.items() if isinstance(prop, CaseProperty)]
STATISTICAL_PROPERTIES = [name for name, prop in REGISTRY.items() if prop.layer == 4]


@pytest.mark.interpreter
@pytest.mark.parametrize("name", CASE_PROPERTIES)
def test_kernel_under_test_holds(name, kernel_under_test, run_context):
    _assert_holds(name, kernel_under_test, run_context)


SUITE_SECONDS_PER_REQUEST = 8e-3  # kernel_cost's own line between a fast kernel and the interpreter


@pytest.mark.statistical
@pytest.mark.parametrize("name", STATISTICAL_PROPERTIES)
def test_kernel_under_test_has_the_exact_law(name, kernel_under_test, run_context):
    if run_context.device.type != "cuda":
        _, per_request = kernel_cost(kernel_under_test, run_context)
        if per_request > SUITE_SECONDS_PER_REQUEST:
            pytest.skip(f"{per_request * 1e3:.0f} ms per request: time-sized statistics run in "
                        "`python -m harness check`, not in the suite")
    _assert_holds(name, kernel_under_test, run_context)


def _assert_holds(name, kernel, ctx):
    result = REGISTRY[name].run(kernel, ctx)
    if result.verdict in (NOT_CLAIMED, SKIPPED):
        pytest.skip(f"{result.verdict}: {result.note}")
    detail = (
        "\n".join(
            f"{f.cls} @ {f.first_field}: {f.message}\n  case: {f.case}\n  repro: {f.repro}"
            for f in result.failures
        )
        or result.note
    )
    assert result.verdict == PASS, detail
