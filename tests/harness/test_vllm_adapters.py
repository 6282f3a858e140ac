"""vLLM's published verifiers (``harness.adapters.vllm``) through the harness, on small cases.

Runs every claimed non-statistical property on ``mrv2`` and ``v1`` with the ci profile (fewer examples:
vLLM's kernels run under Triton's interpreter here), plus unit tests of the argument mapping. Without
vLLM installed these tests skip with the install command, except under CI (``CI`` set), where a
missing vLLM is a failure: CI installs it (``.ci/run``) and must run them.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from harness.adapters import vllm as adapter
from harness.contract import VerifyBatch
from harness.profiles import PROFILES
from harness.properties import REGISTRY
from harness.properties.base import FAIL, NOT_CLAIMED, PASS, SKIPPED, RunContext
from harness.properties.case_property import CaseProperty

UNAVAILABLE = adapter.vllm_available()
needs_vllm = pytest.mark.skipif(
    bool(UNAVAILABLE) and not os.environ.get("CI"), reason=f"{UNAVAILABLE} ({adapter.INSTALL_HINT})"
)
CASE_PROPERTIES = [name for name, prop in REGISTRY.items() if isinstance(prop, CaseProperty)]
EXAMPLES = 6  # per property: the interpreter runs vLLM's six launches per call at ~0.05-0.3 s each


def _context(seed: int) -> RunContext:
    profile = dataclasses.replace(PROFILES["ci"], max_examples=EXAMPLES)
    print(f"run seed {seed}")
    return RunContext(profile=profile, device=torch.device("cpu"), seed=seed, kernel_spec="vllm")


def _batch(method="token", draft_logits=True, temps=(0.7, 0.0, 1.0), ids=(3, 5, 1, 2, 4), budget=None):
    gen = torch.Generator().manual_seed(1234)
    lens, vocab = [2, 0, 3], 37
    rows = sum(lens) + len(lens)
    return VerifyBatch(
        target_logits=torch.randn(rows, vocab, generator=gen),
        draft_logits=torch.randn(sum(lens), vocab, generator=gen) if draft_logits else None,
        draft_token_ids=torch.tensor(ids, dtype=torch.int64),
        cu_num_draft_tokens=torch.tensor([0, 2, 2, 5], dtype=torch.int32),
        temperature=torch.tensor(temps, dtype=torch.float32),
        seeds=torch.tensor([11, -12, 2**40], dtype=torch.int64),
        positions=torch.tensor([5, 9, 2**32 - 1], dtype=torch.int64),
        method=method,
        max_chunk_bytes=budget,
    )


def test_version_guard_names_the_supported_versions(monkeypatch):
    adapter._import_vllm.cache_clear()
    monkeypatch.setattr(adapter, "installed_version", lambda: "0.32.1")
    try:
        with pytest.raises(adapter.VllmUnavailable, match=r"vLLM 0\.32\.1 is installed.*knows vLLM 0\.33\.0"):
            adapter.mrv2.verify(_batch())
        monkeypatch.setattr(adapter, "installed_version", lambda: None)
        with pytest.raises(adapter.VllmUnavailable, match="pip install --no-deps vllm==0.33.0"):
            adapter.v1.verify(_batch())
    finally:
        adapter._import_vllm.cache_clear()


def test_ci_runs_the_vllm_tests():
    """Under CI a missing vLLM fails here instead of skipping every test below."""
    if os.environ.get("CI"):
        assert not UNAVAILABLE, f"CI must run the vLLM adapter tests: {UNAVAILABLE}"


@needs_vllm
@pytest.mark.interpreter
@pytest.mark.parametrize("method", ["token", "block"])
def test_mrv2_mapping_greedy_placeholder_padding_and_chunks(method):
    # Request 0 greedy with drafts = its rows' argmax; request 2's first draft is a -1 placeholder.
    base = _batch(method, temps=(0.0, 0.5, 1.3))
    argmax = base.target_logits.argmax(dim=-1)
    ids = torch.tensor([int(argmax[0]), int(argmax[1]), -1, 2, 4])
    batch = dataclasses.replace(base, draft_token_ids=ids)
    out = adapter.mrv2.verify(batch)
    assert out.output_token_ids.shape == (3, 4) and out.output_token_ids.dtype == torch.int64
    assert out.num_emitted.tolist()[0] == 3  # greedy: both drafts are the argmax, then the bonus argmax
    assert out.output_token_ids[0].tolist() == [int(argmax[0]), int(argmax[1]), int(argmax[2]), -1]
    assert out.num_emitted.tolist()[2] == 1  # a -1 placeholder is always rejected
    for r, n in enumerate(out.num_emitted.tolist()):
        assert (out.output_token_ids[r, n:] == -1).all()  # vLLM leaves these uninitialised
    chunked = adapter.mrv2.verify(dataclasses.replace(batch, max_chunk_bytes=1))  # one request a chunk
    assert torch.equal(chunked.output_token_ids, out.output_token_ids)
    assert torch.equal(chunked.num_emitted, out.num_emitted)


@needs_vllm
@pytest.mark.interpreter
def test_v1_greedy_rows_and_placeholders():
    base = _batch(temps=(0.0, 0.0, 0.0))
    argmax = base.target_logits.argmax(dim=-1)
    batch = dataclasses.replace(base, draft_token_ids=torch.tensor([int(argmax[0]), int(argmax[1]), 7, 8, 9]))
    out = adapter.v1.verify(batch)
    assert out.output_token_ids[0].tolist() == [int(argmax[0]), int(argmax[1]), int(argmax[2]), -1]
    assert out.num_emitted.tolist()[:2] == [3, 1] and out.output_token_ids[1, 0] == int(argmax[3])


@needs_vllm
@pytest.mark.interpreter
@pytest.mark.parametrize("name", CASE_PROPERTIES)
@pytest.mark.parametrize("which", ["mrv2", "v1"])
def test_vllm_kernel_holds_every_claimed_case_property(which, name):
    kernel = getattr(adapter, which)
    result = REGISTRY[name].run(kernel, _context(seed=31))
    if result.verdict in (NOT_CLAIMED, SKIPPED):
        pytest.skip(f"{result.verdict}: {result.note}")
    detail = "\n".join(f"{f.cls} @ {f.first_field}: {f.message}\n  case: {f.case}" for f in result.failures)
    assert result.verdict == PASS, detail or result.note
    assert result.cases > 0


def test_strategies_draw_no_temperature_below_the_domain():
    from hypothesis import find
    from hypothesis.errors import NoSuchExample

    from harness.generation.strategies import TEMPERATURE_BANDS, temperatures

    assert 0 < find(temperatures(TEMPERATURE_BANDS), lambda t: 0 < t < 0.01) < 0.01  # default domain
    with pytest.raises(NoSuchExample):
        find(temperatures(TEMPERATURE_BANDS, 0.01), lambda t: 0 < t < 0.01)
    assert find(temperatures(("tiny",), 0.01), lambda t: True) >= 0.01


def test_no_case_outside_the_declared_domain_reaches_the_kernel():
    """A kernel declaring min_temperature 0.01 never sees a positive temperature below it (and the
    property reports what it ran): the recording kernel fails the run if one arrives."""
    from harness.adapters.reference_kernel import ReferenceKernel

    class Recording(ReferenceKernel):
        name = "recording"
        capabilities = dataclasses.replace(ReferenceKernel.capabilities, min_temperature=0.01)
        seen: list = []

        def verify(self, batch):
            self.seen.extend(batch.temperature.tolist())
            return super().verify(batch)

    kernel = Recording()
    for name in ("structural", "logit_shift", "point_mass_identity", "single_draft_block_equals_token"):
        result = REGISTRY[name].run(kernel, _context(seed=7))
        assert result.verdict in (PASS, FAIL) and result.verdict == PASS, result.failures
    low = [t for t in kernel.seen if 0.0 < t < 0.01]
    assert kernel.seen and not low, low
