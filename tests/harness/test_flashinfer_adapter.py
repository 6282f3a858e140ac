"""``harness.adapters.flashinfer`` on a CPU: the argument mapping against a fake ``flashinfer.sampling``
that records its calls, the unavailable errors and the declared domain. FlashInfer's own kernel needs a
CUDA device: its verdicts come from ``bench/scorecard_gpu.sh`` on a GPU (docs/engines.md).
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from harness.adapters import flashinfer as adapter
from harness.contract import VerifyBatch
from tests.harness.engine_batches import assert_install_guard, small_batch


class FakeSampling(types.ModuleType):
    """Records every call; ``chain_speculative_sampling`` accepts every draft and emits the bonus
    argmax, padding nothing (so the adapter's output mapping is what the test sees)."""

    def __init__(self):
        super().__init__("flashinfer.sampling")
        self.calls = []

    def softmax(self, logits, temperature=None, enable_pdl=None):
        self.calls.append(("softmax", logits.clone(), temperature.clone()))
        return torch.softmax(logits / temperature[:, None], dim=-1)

    def chain_speculative_sampling(
        self, draft_probs, draft_token_ids, target_probs, maybe_output_accepted_token_num=None,
        maybe_output_emitted_draft_token_num=None, deterministic=True, generator=None, seed=None,
        offset=None,
    ):  # fmt: skip
        self.calls.append(("chain", draft_probs, draft_token_ids, target_probs, deterministic, seed, offset))
        b, n = draft_token_ids.shape
        bonus = target_probs[:, n].argmax(dim=-1, keepdim=True).to(torch.int32)
        out = torch.cat([draft_token_ids, bonus], dim=1)
        num = torch.full((b,), n, dtype=torch.int32)
        return out, num, num


@pytest.fixture
def fake(monkeypatch):
    module = FakeSampling()
    monkeypatch.setitem(sys.modules, "flashinfer.sampling", module)
    monkeypatch.setattr(adapter, "installed_version", lambda: "0.7.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    adapter._api.cache_clear()
    yield module
    adapter._api.cache_clear()


def _batch(**kwargs) -> VerifyBatch:
    return small_batch(11, 7, **{"draft_logits": True, **kwargs})


def test_unavailable_errors_name_the_install(monkeypatch):
    assert_install_guard(monkeypatch, adapter, adapter._api, adapter.FlashInferUnavailable,
                         "pip install flashinfer-python==0.7.4", "0.6.1", "0.7.4",
                         adapter.flashinfer_available, _batch())


def test_declared_domain():
    caps = adapter.chain.capabilities
    assert adapter.chain.methods == frozenset({"token"})  # no block verification in FlashInfer
    assert caps.point_mass_drafts and caps.draft_logits and caps.greedy
    assert not (caps.chunking or caps.logprobs or caps.raises_on_bad_input or caps.draft_padding_minus_one)
    assert not hasattr(adapter.chain, "random_draws")  # internal Philox: no coupling


def test_signature_guard(fake, monkeypatch):
    monkeypatch.setattr(fake, "chain_speculative_sampling", lambda draft_probs, draft_token_ids: None)
    with pytest.raises(adapter.FlashInferUnavailable, match="signature changed"):
        adapter.chain.verify(_batch())


def test_mapping_groups_by_length_seeds_offsets_and_one_hot_greedy(fake):
    batch = _batch()
    out = adapter.chain.verify(batch)
    chains = [c for c in fake.calls if c[0] == "chain"]
    assert [c[2].shape[1] for c in chains] == [2, 0, 3]  # one call per draft length, in first-seen order
    for (_, draft, ids, target, deterministic, seed, offset), r in zip(chains, (0, 1, 2), strict=True):
        k = ids.shape[1]
        assert draft.dtype == target.dtype == torch.float32 and ids.dtype == torch.int32
        assert target.shape == (1, k + 1, 11) and draft.shape == (1, k, 11) and deterministic
        assert seed.tolist() == [batch.seeds[r].item()] and seed.dtype == torch.int64
        assert offset.tolist() == [batch.positions[r].item()] and offset.dtype == torch.int64
        rows = batch.target_logits[[int(batch.cu_num_draft_tokens[r]) + r + j for j in range(k + 1)]]
        t = float(batch.temperature[r])
        if t == 0.0:  # greedy: one-hot target at the first argmax
            assert torch.equal(target[0], torch.nn.functional.one_hot(rows.argmax(-1), 11).float())
        else:
            assert torch.allclose(target[0], torch.softmax(rows / t, dim=-1))
        lo = int(batch.cu_num_draft_tokens[r])
        assert ids[0].tolist() == batch.draft_token_ids[lo : lo + k].tolist()
        if k:
            assert torch.allclose(draft[0], torch.softmax(batch.draft_logits[lo : lo + k] / t, dim=-1))
    assert out.output_token_ids.shape == (3, 4) and out.output_token_ids.dtype == torch.int64
    assert out.num_emitted.tolist() == [3, 1, 4]
    assert out.output_token_ids[1].tolist()[1:] == [-1, -1, -1]  # past a shorter group: -1


def test_point_mass_drafts_are_one_hot_and_minus_one_is_passed_on(fake):
    batch = _batch(draft_logits=False, ids=(3, -1, 1, 2, 4))
    adapter.chain.verify(batch)
    _, draft, ids, *_ = next(c for c in fake.calls if c[0] == "chain" and c[2].shape[1] == 2)
    assert ids[0].tolist() == [3, -1]  # FlashInfer indexes with it (flashinfer#879): passed as it is
    assert draft[0, 0].tolist() == torch.nn.functional.one_hot(torch.tensor(3), 11).float().tolist()
    assert draft[0, 1].abs().sum() == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlashInfer's kernel needs a CUDA device")
def test_real_kernel_runs_when_installed():
    reason = adapter.flashinfer_available()
    if reason:
        pytest.skip(reason)
    out = adapter.chain.verify(_batch().to("cuda"))
    assert out.num_emitted.min() >= 1
