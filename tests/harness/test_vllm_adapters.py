"""vLLM's published verifiers (``harness.adapters.vllm``) through the harness, on small cases.

Runs every claimed non-statistical property on ``mrv2`` and ``v1`` with the ci profile (fewer examples:
vLLM's kernels run under Triton's interpreter here), plus unit tests of the argument mapping. Without
vLLM installed these tests skip with the install command, except under CI (``CI`` set), where a
missing vLLM is a failure: CI installs it (``.ci/run``) and must run them.
"""

from __future__ import annotations

import dataclasses
import json
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
V1_GONE = not UNAVAILABLE and adapter._import_vllm()["v1"] is None  # vLLM >= 0.34 removed the V1 engine
needs_v1 = pytest.mark.skipif(V1_GONE, reason="the installed vLLM has no V1 engine (removed in 0.34)")
SKIP_MASKED = not UNAVAILABLE and adapter._import_vllm()["skip_masked_vocab_blocks"]
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
        known = r"vLLM 0\.32\.1 is installed.*knows vLLM 0\.33\.0, 0\.34\.0"
        with pytest.raises(adapter.VllmUnavailable, match=known):
            adapter.mrv2.verify(_batch())
        monkeypatch.setattr(adapter, "installed_version", lambda: None)
        with pytest.raises(adapter.VllmUnavailable, match="pip install --no-deps vllm==0.34.0"):
            adapter.v1.verify(_batch())
    finally:
        adapter._import_vllm.cache_clear()


def test_version_order_and_verdicts():
    assert adapter._release("0.34.0rc1") == (0, 34, 0) and adapter._release("0.35.1+cu130") == (0, 35, 1)
    assert adapter._version_verdict("0.34.0") == ""
    assert "newer than the versions" in adapter._version_verdict("0.35.1")
    with pytest.raises(adapter.VllmUnavailable, match="0.33.0, 0.34.0"):
        adapter._version_verdict("0.30.2")


def test_signature_check_names_what_does_not_fit():
    ok = ["target_logits", "draft_logits_cache", *adapter._MRV2_ARGS[2:], "use_block_verification"]
    assert adapter._signature_problem(ok) == ""
    assert adapter._signature_problem(["target_logits", "draft_logits", *ok[2:]]) == ""  # 0.33's name
    renamed = ["target_logits", "draft_probs", *ok[2:]]
    assert "parameter 1 is 'draft_probs'" in adapter._signature_problem(renamed)
    assert "use_block_verification" in adapter._signature_problem(ok[:-1])


@needs_vllm
def test_a_newer_vllm_runs_with_a_warning_when_its_signatures_fit(monkeypatch):
    adapter._import_vllm.cache_clear()
    real = adapter.installed_version()
    monkeypatch.setattr(adapter, "installed_version", lambda: "9.0.0")
    notes = list(adapter.IMPORT_NOTES)
    try:
        with pytest.warns(UserWarning, match="vLLM 9.0.0 is newer"):
            api = adapter._import_vllm()
        assert api["version"] == "9.0.0" and adapter.mrv2.name == "vllm-9.0-mrv2"
        adapter._import_vllm.cache_clear()
        signature = adapter.inspect.signature

        def renamed(fn):  # a future vLLM that renamed rejection_sample's second argument
            sig = signature(fn)
            params = list(sig.parameters.values())
            if fn.__name__ == "rejection_sample":
                params[1] = params[1].replace(name="draft_probs")
            return sig.replace(parameters=params)

        monkeypatch.setattr(adapter.inspect, "signature", renamed)
        with pytest.raises(adapter.VllmUnavailable, match="parameter 1 is 'draft_probs'"):
            adapter._import_vllm()
    finally:
        adapter.IMPORT_NOTES[:] = notes
        monkeypatch.setattr(adapter, "installed_version", lambda: real)
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
@pytest.mark.skipif(not V1_GONE, reason="the installed vLLM still has its V1 engine")
def test_v1_says_clearly_that_the_installed_vllm_removed_it():
    with pytest.raises(adapter.VllmUnavailable, match=r"removed the V1 engine.*harness.adapters.vllm:mrv2"):
        adapter.v1.verify(_batch())


@needs_vllm
@needs_v1
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
    if which == "v1" and V1_GONE:
        pytest.skip("the installed vLLM has no V1 engine (removed in 0.34)")
    kernel = getattr(adapter, which)
    result = REGISTRY[name].run(kernel, _context(seed=31))
    if result.verdict in (NOT_CLAIMED, SKIPPED):
        pytest.skip(f"{result.verdict}: {result.note}")
    detail = "\n".join(f"{f.cls} @ {f.first_field}: {f.message}\n  case: {f.case}" for f in result.failures)
    assert result.cases > 0
    if result.verdict == FAIL and all(_classified(kernel, f.case) for f in result.failures):
        return  # vLLM's classified defects (docs/findings/vllm-0.3x.md), replayed as KNOWN by the corpus
    assert result.verdict == PASS, detail or result.note


def _classified(kernel, case: dict) -> bool:
    """``case`` is a regression entry classified as a defect of ``kernel`` (its ``known_defects``)."""
    from harness.campaigns.corpus import corpus_files, load_entry

    key = lambda c: json.dumps(c.get("tensors"), sort_keys=True)
    entries = [load_entry(p) for p in corpus_files()]
    known = {key(e.case.to_dict()) for e in entries if kernel.name in e.known_defects}
    return key(case) in known


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


@needs_vllm
@pytest.mark.interpreter
def test_accept_uniforms_are_vllms_own():
    """Each request has two drafts: the first surely passes (target row == draft row, ratio 1), the
    second gets ``p(x) / q(x) = u (1 + s 1e-3)`` from the ``u`` that ``random_draws`` reports for it:
    vLLM must accept it exactly in the requests with ``s = +1``, under token and block verification
    (block: ``h = p_2`` at the last slot; the second slot's uniform is the one block verification keys
    by step). Uniforms off by more than 1e-3 (another key, stream, step or clamp) flip about half of
    the 24 decisions."""
    reqs = 24
    seeds = torch.arange(reqs, dtype=torch.int64) * 7919 + 5
    sign = torch.tensor([1.0, -1.0]).repeat(reqs // 2)
    for method in ("token", "block"):
        probe = VerifyBatch(
            target_logits=torch.zeros(3 * reqs, 2), draft_logits=torch.zeros(2 * reqs, 2),
            draft_token_ids=torch.zeros(2 * reqs, dtype=torch.int64),
            cu_num_draft_tokens=torch.arange(reqs + 1, dtype=torch.int32) * 2,
            temperature=torch.ones(reqs), seeds=seeds, positions=seeds * 3, method=method,
        )
        accept, _ = adapter.mrv2.random_draws(probe)
        ratio = (accept[1::2].double() * (1 + sign.double() * 1e-3)).clamp(max=1.999)
        p0 = ratio / 2  # q(0) = 1/2 (draft logits equal)
        target = probe.target_logits.clone()
        target[1::3, 0] = torch.log(p0).float()
        target[1::3, 1] = torch.log1p(-p0).float()
        out = adapter.mrv2.verify(dataclasses.replace(probe, target_logits=target))
        assert (out.num_emitted == 3).tolist() == (sign > 0).tolist(), (method, accept.tolist())
        assert (out.num_emitted >= 2).all(), method  # the first draft always passes


@needs_vllm
@pytest.mark.interpreter
def test_sampling_uniforms_are_vllms_own():
    """On a flat target row the bonus token is the race's winner alone: the token with the smallest
    sampling uniform (``E = -log1p(-u)`` is smallest there, so its score ``-log E`` is largest)."""
    batch = VerifyBatch(
        target_logits=torch.zeros(6, 300), draft_logits=None,
        draft_token_ids=torch.zeros(0, dtype=torch.int64),
        cu_num_draft_tokens=torch.zeros(7, dtype=torch.int32), temperature=torch.ones(6),
        seeds=torch.tensor([1, 2, 3, -4, 2**40, 77]), positions=torch.tensor([0, 5, 9, 2**32 + 1, 3, 1]),
    )
    _, sample = adapter.mrv2.random_draws(batch)
    out = adapter.mrv2.verify(batch)
    assert out.output_token_ids[:, 0].tolist() == sample.argmin(dim=1).tolist()


@needs_vllm
@pytest.mark.interpreter
@pytest.mark.skipif(not SKIP_MASKED, reason="the installed vLLM has no skip_masked_vocab_blocks (0.34+)")
def test_skip_masked_vocab_blocks_on_and_off_agree_with_the_oracle():
    """Rows whose second and third 1024-wide vocabulary blocks are all -inf: vLLM's early exit for those
    blocks (``mrv2_skip_masked``) and the plain path must both emit what the oracle emits on vLLM's
    uniforms, request by request."""
    from harness.judging.decision_compare import compare_decisions
    from harness.judging.oracle import run_reference

    gen = torch.Generator().manual_seed(5)
    lens, vocab = [2, 0, 3, 1], 3000
    rows = sum(lens) + len(lens)
    target = torch.randn(rows, vocab, generator=gen)
    target[:, 1024:] = float("-inf")
    for method in ("token", "block"):
        batch = VerifyBatch(
            target_logits=target, draft_logits=torch.randn(sum(lens), vocab, generator=gen),
            draft_token_ids=torch.tensor([3, 5, 1, 2, 4, 1000]),
            cu_num_draft_tokens=torch.tensor([0, 2, 2, 5, 6], dtype=torch.int32),
            temperature=torch.tensor([0.7, 1.0, 1.3, 0.0]), seeds=torch.tensor([11, 12, 13, 14]),
            positions=torch.tensor([5, 9, 2**32 - 1, 0]), method=method,
        )
        accept, sample = adapter.mrv2.random_draws(batch)
        ref = run_reference(batch, accept, sample)
        for kernel in (adapter.mrv2, adapter.mrv2_skip_masked):
            out = kernel.verify(batch)
            assert not compare_decisions(batch, out, ref, False).real, (kernel.name, method)
