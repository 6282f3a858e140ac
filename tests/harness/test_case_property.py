"""The case-property runner: a property that judged no case must not report "pass"."""

from __future__ import annotations

from harness.adapters.reference_kernel import kernel as reference
from harness.properties.base import PASS, SKIPPED
from harness.properties.case_property import CaseCheck, CaseProperty
from tests.harness.property_helpers import cpu_context


class _NeverApplies(CaseProperty):
    name = "test_never_applies"

    def check(self, kernel, case, ctx) -> CaseCheck:
        return CaseCheck(skipped="never applicable")


class _AlwaysApplies(CaseProperty):
    name = "test_always_applies"

    def check(self, kernel, case, ctx) -> CaseCheck:
        return CaseCheck()


def test_a_property_with_no_applicable_case_is_skipped_not_passed():
    result = _NeverApplies().run(reference, cpu_context())
    assert result.cases == 0
    assert result.verdict == SKIPPED and "no applicable case" in result.note


def test_a_property_with_cases_passes():
    result = _AlwaysApplies().run(reference, cpu_context())
    assert result.verdict == PASS and result.cases > 0
