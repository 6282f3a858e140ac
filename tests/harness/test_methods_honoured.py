"""Every property honours a kernel's ``methods``: a single-method kernel is never sent a batch of the
other method, and the properties that need both methods report ``not claimed`` (issue 33).

The kernel under test is the plain PyTorch implementation restricted to one method; it records every
method it is called with and raises on an undeclared one (which a property would turn into a
failure or an error, so the verdicts are checked too). The whole registry runs, in the ``ci``
profile on the CPU, through ``run_properties`` (what ``python -m harness check`` does) and, for the
property that once ignored ``methods``, through its own ``run``.
"""

from __future__ import annotations

import pytest
import torch

from harness.implementations.torch_eager import TorchEagerKernel
from harness.profiles import PROFILES
from harness.properties import REGISTRY
from harness.properties.base import ERROR, FAIL, NOT_CLAIMED, RunContext
from harness.runner import run_properties, select_properties

NEEDS_BOTH = {"single_draft_block_equals_token", "block_dominates_token"}


class SingleMethod(TorchEagerKernel):
    def __init__(self, method: str):
        self.methods = frozenset({method})
        self.name = f"torch_eager[{method} only]"
        self.seen: set[str] = set()

    def verify(self, batch):
        self.seen.add(batch.method)
        if batch.method not in self.methods:
            raise AssertionError(f"sent method {batch.method!r}, declared {sorted(self.methods)}")
        return super().verify(batch)


def _context() -> RunContext:
    ctx = RunContext(PROFILES["ci"], torch.device("cpu"), seed=0, kernel_spec="<single method>")
    ctx.extra["stat_seconds_per_property"] = 1800.0  # a loaded machine must not skip the statistics
    return ctx


@pytest.mark.parametrize("method", ["token", "block"])
def test_no_property_sends_an_undeclared_method(method):
    kernel = SingleMethod(method)
    results = run_properties(kernel, _context(), select_properties(), allow_subprocess=False)
    by_name = {r.name: r for r in results}
    assert set(by_name) == set(REGISTRY)
    assert kernel.seen == {method}, kernel.seen
    bad = {r.name: (r.verdict, r.note, [f.message for f in r.failures]) for r in results
           if r.verdict in (FAIL, ERROR)}
    assert not bad, bad
    for name in NEEDS_BOTH:
        assert by_name[name].verdict == NOT_CLAIMED, (name, by_name[name].verdict)
        assert "both methods" in by_name[name].note


def test_block_dominates_token_asks_for_itself():
    """Called directly (as tests and plug-ins do), not through the runner."""
    kernel = SingleMethod("token")
    result = REGISTRY["block_dominates_token"].run(kernel, _context())
    assert result.verdict == NOT_CLAIMED and kernel.seen <= {"token"}
