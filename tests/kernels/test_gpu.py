"""GPU-only tests (skipped without CUDA): large vocabularies, many requests, memory bound."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from tests.kernels._batches import (
    Agreement,
    compare_to_reference,
    make_batch,
    reference_result,
    run_kernel,
    stopped_inside,
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.parametrize("vocab,dtype", [(32000, torch.bfloat16), (151936, torch.float16),
                                         (262144, torch.float32), (262144, torch.bfloat16)])
def test_coupled_large_vocab(vocab, dtype):
    pytest.importorskip("reference.verify")
    master = int(os.environ.get("SPECFUZZ_SEED", "7")) + vocab
    print(f"seed {master}")
    tally = Agreement()
    # "near" (drafts close to the target) is where block verification's Z and h decide
    combos = [("token", True, "normal"), ("block", True, "peaked"), ("block", False, "masked"),
              ("token", False, "huge"), ("block", True, "near"), ("token", True, "near")]
    inside = 0
    for i, (method, with_draft, family) in enumerate(combos):
        batch = make_batch(master + i, num_reqs=8, max_k=8, vocab=vocab, dtype=dtype, family=family,
                           with_draft=with_draft, device="cuda")
        out = run_kernel(batch, method, want_logprobs=True)
        compare_to_reference(batch, method, out, reference_result(batch, method, True), tally)
        if family == "near" and method == "block":
            inside += stopped_inside(batch, out)
    print(f"vocab {vocab} {dtype}: requests {tally.requests} ties {tally.ties} "
          f"mismatches {len(tally.mismatches)}, block requests stopped inside their draft {inside}")
    assert not tally.mismatches, "\n".join(tally.mismatches)
    assert tally.ties <= 0.05 * tally.requests


@pytest.mark.parametrize("method", ["token", "block"])
def test_chunked_equals_unchunked_large(method):
    batch = make_batch(99, num_reqs=64, max_k=16, vocab=128256, dtype=torch.bfloat16, device="cuda")
    whole = run_kernel(batch, method, want_logprobs=True, max_chunk_bytes=None)
    rng = np.random.default_rng(99)
    for budget in [1, int(rng.integers(1, 1 << 16)), int(rng.integers(1 << 16, 1 << 22)), 1 << 30]:
        chunked = run_kernel(batch, method, want_logprobs=True, max_chunk_bytes=budget)
        assert all(torch.equal(a, b) for a, b in zip(whole, chunked, strict=True)), budget


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_peak_memory_512x8x262144(dtype):
    """Peak device memory stays within max_chunk_bytes + 5% of the input (issue 3)."""
    reqs, k, vocab = 512, 8, 262144
    gen = torch.Generator(device="cuda").manual_seed(5)
    target = torch.randn(reqs * (k + 1), vocab, device="cuda", generator=gen).to(dtype)
    draft = torch.randn(reqs * k, vocab, device="cuda", generator=gen).to(dtype)
    ids = torch.randint(0, vocab, (reqs * k,), device="cuda", generator=gen)
    cu = torch.arange(0, reqs * k + 1, k, device="cuda", dtype=torch.int32)
    temperature = torch.ones(reqs, device="cuda")
    seeds = torch.arange(reqs, device="cuda", dtype=torch.int64)
    positions = torch.zeros(reqs, device="cuda", dtype=torch.int64)
    input_bytes = (target.numel() + draft.numel()) * target.element_size()
    import kernels

    for budget in (1 << 30, 1 << 20):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        baseline = torch.cuda.memory_allocated()
        out = kernels.rejection_sample(target, draft, ids, cu, temperature, seeds, positions, method="block",
                                       max_chunk_bytes=budget, want_logprobs=True)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - baseline
        print(f"{dtype} budget {budget}: peak extra {extra / 2**20:.1f} MiB, "
              f"input {input_bytes / 2**30:.2f} GiB")
        assert extra <= budget + 0.05 * input_bytes
        del out


@pytest.mark.parametrize("method", ["token", "block"])
def test_captured_graph_equals_direct_call_after_new_values(method):
    """capture_verify replays the same kernels: equal to rejection_sample on new input values."""
    import kernels

    batch = make_batch(123, num_reqs=12, max_k=6, vocab=32000, dtype=torch.bfloat16, device="cuda")
    captured = kernels.capture_verify(*batch.args(), draft_lengths=batch.lengths, method=method,
                                      want_logprobs=True)
    fresh = make_batch(124, lengths=batch.lengths, vocab=32000, dtype=torch.bfloat16, device="cuda")
    for name in ("target_logits", "draft_logits", "draft_token_ids", "temperature", "seeds", "positions"):
        getattr(batch, name).copy_(getattr(fresh, name))
    replayed = [t.clone() for t in captured.replay()]
    direct = kernels.rejection_sample(*batch.args(), method=method, want_logprobs=True)
    assert all(torch.equal(a, b) for a, b in zip(replayed, direct, strict=True))


@pytest.mark.parametrize("table_delay_ns", [0, 50_000])
@pytest.mark.parametrize("method,with_draft", [("token", True), ("block", True), ("block", False)])
def test_dependent_launches_equal_plain_launches(method, with_draft, table_delay_ns, kernel_setting):
    """Programmatic dependent launches (kernels/dependent_launch.py) give the plain launches' outputs
    bit for bit. Batches alternate on one reused workspace, so a kernel that read a statistic
    before its wait would see the other batch's value. With ``table_delay_ns`` the row table holds
    50 us before it writes (``dependent_launch.TEST_TABLE_DELAY_NS``), so pass 1, the kernel after it, runs
    inside that window: a pass 1 that read the table before its wait fails here (without the delay
    the table is done before pass 1 has loaded its first block)."""
    from kernels import dependent_launch

    enabled = dependent_launch.enabled
    if not enabled(torch.device("cuda")):
        pytest.skip("no programmatic dependent launch on this device")
    shapes = [(64, 4, 151936, torch.bfloat16), (128, 8, 32000, torch.float32)]
    for num_reqs, k, vocab, dtype in shapes:
        pair = [make_batch(900 + i, lengths=[k] * num_reqs, vocab=vocab, dtype=dtype, family=family,
                           with_draft=with_draft, device="cuda")
                for i, family in enumerate(("normal", "near"))]
        kernel_setting(dependent_launch, "enabled", lambda device: False)
        plain = [run_kernel(b, method, want_logprobs=True, draft_lengths=b.lengths) for b in pair]
        kernel_setting(dependent_launch, "enabled", enabled)
        kernel_setting(dependent_launch, "TEST_TABLE_DELAY_NS", table_delay_ns)
        for rnd in range(6):
            for b, expected in zip(pair, plain, strict=True):
                out = run_kernel(b, method, want_logprobs=True, draft_lengths=b.lengths)
                assert all(torch.equal(x, y) for x, y in zip(out, expected, strict=True)), (
                    num_reqs, k, vocab, dtype, rnd, b.seed)
