"""``harness.adapters.sglang`` on a CPU: the chain-as-tree mapping against fake ops that record their
calls, the unavailable errors and the declared domain. SGLang's op library needs CUDA 13 and a GPU: its
verdicts come from ``bench/scorecard_gpu.sh`` (docs/engines.md).
"""

from __future__ import annotations

import types

import pytest
import torch

from harness.adapters import sglang as adapter
from harness.contract import VerifyBatch
from tests.harness.engine_batches import assert_install_guard, small_batch


def _walk_accepting_all(calls, name, bonus):
    """A fake op: follows ``retrive_next_token`` from node 0, accepts every node, emits ``bonus``."""

    def op(predicts, accept_index, accept_token_num, candidates, retrive_index, nxt, sibling, *rest):
        calls.append((name, candidates.clone(), retrive_index.clone(), nxt.clone(), sibling.clone(), rest))
        for b in range(candidates.shape[0]):
            node, j, last = 0, 0, int(retrive_index[b, 0])
            accept_index[b, 0] = last
            while int(nxt[b, node]) != -1:
                node = int(nxt[b, node])
                predicts[last] = int(candidates[b, node])
                j, last = j + 1, int(retrive_index[b, node])
                accept_index[b, j] = last
            predicts[last] = bonus
            accept_token_num[b] = j

    return op


@pytest.fixture
def fake(monkeypatch):
    calls = []

    def renorm(probs, renormed, top_k, top_k_val):
        calls.append(("top_k_renorm_probs", probs.clone(), top_k.clone(), top_k_val))
        renormed.copy_(probs)

    ops = types.SimpleNamespace(
        tree_speculative_sampling_target_only=_walk_accepting_all(calls, "tree", bonus=9),
        verify_tree_greedy=_walk_accepting_all(calls, "greedy", bonus=8),
        top_k_renorm_probs=renorm,
    )
    monkeypatch.setattr(adapter, "_ops", lambda: ops)
    return calls


def _batch(**kwargs) -> VerifyBatch:
    return small_batch(13, 3, **{"draft_logits": False, **kwargs})


def test_unavailable_errors_name_the_install(monkeypatch):
    assert_install_guard(monkeypatch, adapter, adapter._ops, adapter.SglangUnavailable,
                         "pip install sglang-kernel==0.4.6", "0.3.21", "0.4.6", adapter.sglang_available,
                         _batch())


def test_declared_domain():
    caps = adapter.chain.capabilities
    assert adapter.chain.methods == frozenset({"token"})
    assert caps.point_mass_drafts and not caps.draft_logits and caps.greedy  # target-only
    assert caps.min_temperature == 1e-6  # SGLang turns smaller temperatures into greedy
    assert not (caps.chunking or caps.logprobs or caps.raises_on_bad_input or caps.draft_padding_minus_one)
    assert not hasattr(adapter.chain, "random_draws")  # inverse-CDF correction: no exact coupling


def test_sampled_batch_maps_chains_to_trees(fake):
    batch = _batch()
    out = adapter.chain.verify(batch)
    (renorm,) = [c for c in fake if c[0] == "top_k_renorm_probs"]
    assert renorm[2].tolist() == [1 << 30] * 3 + [1] + [1 << 30] * 4  # greedy rows: top_k = 1
    used_rows = [0, 1, 2, 3, 4, 5, 6, 7]  # every target row once, in order
    temps = torch.tensor([0.7] * 3 + [1.0] + [1.3] * 4)
    want = torch.softmax(batch.target_logits[used_rows] / temps[:, None], dim=-1)
    assert torch.allclose(renorm[1], want)
    (tree,) = [c for c in fake if c[0] == "tree"]
    _, candidates, retrive_index, nxt, sibling, rest = tree
    assert candidates.tolist() == [[0, 3, 5, 0], [0, 0, 0, 0], [0, 1, 2, 4]]
    assert retrive_index.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert nxt.tolist() == [[1, 2, -1, -1], [-1, -1, -1, -1], [1, 2, 3, -1]]
    assert (sibling == -1).all() and candidates.dtype == retrive_index.dtype == torch.int64
    coins, final, target_probs, draft_probs, single, acc, deterministic = rest
    assert coins.shape == (3, 4) and final.shape == (3,) and coins.dtype == torch.float32
    assert (single, acc, deterministic) == (1.0, 1.0, True)  # the exact setting
    assert target_probs.shape == (3, 4, 13) and (draft_probs == 0).all()
    assert (target_probs[0, 3] == 0).all() and torch.allclose(target_probs[2, 3], want[7])
    assert out.output_token_ids.tolist() == [[3, 5, 9, -1], [9, -1, -1, -1], [1, 2, 4, 9]]
    assert out.num_emitted.tolist() == [3, 1, 4]


def test_all_greedy_batch_uses_verify_tree_greedy(fake):
    batch = _batch(temps=(0.0, 0.0, 0.0))
    out = adapter.chain.verify(batch)
    assert [c[0] for c in fake] == ["greedy"]
    (target_predict,) = fake[0][5]
    assert target_predict[2].tolist() == batch.target_logits[4:8].argmax(-1).tolist()
    assert target_predict.dtype == torch.int64 and out.num_emitted.tolist() == [3, 1, 4]


def test_coins_are_per_request_deterministic_and_on_torch_rand_grid():
    batch = _batch()
    coins, final = adapter.chain.coins(batch)
    again, _ = adapter.chain.coins(batch)
    assert torch.equal(coins, again) and ((coins >= 0) & (coins < 1)).all()
    assert torch.equal(coins * 2**24, (coins * 2**24).round())  # multiples of 2^-24, like torch.rand
    sub = VerifyBatch(**{**batch.__dict__, "seeds": batch.seeds[2:], "positions": batch.positions[2:],
                         "temperature": batch.temperature[2:], "cu_num_draft_tokens": torch.tensor([0, 3]),
                         "draft_token_ids": batch.draft_token_ids[2:],
                         "target_logits": batch.target_logits[4:]})
    assert torch.equal(adapter.chain.coins(sub)[0][0], coins[2])  # batch mates do not matter
    assert len(set(final.tolist())) == 3


def test_draft_logits_are_refused(fake):
    with pytest.raises(ValueError, match="target-only"):
        adapter.chain.verify(_batch(draft_logits=True))


def test_caller_coins_reach_the_kernel(fake):
    batch = _batch()
    zeros = torch.zeros(3, 4)
    adapter.chain.verify_with_coins(batch, zeros, torch.zeros(3))
    (tree,) = [c for c in fake if c[0] == "tree"]
    assert torch.equal(tree[5][0], zeros)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="SGLang's op library needs a CUDA device")
def test_real_kernel_runs_when_installed():
    reason = adapter.sglang_available()
    if reason:
        pytest.skip(reason)
    out = adapter.chain.verify(_batch().to("cuda"))
    assert out.num_emitted.min() >= 1
