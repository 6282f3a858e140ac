"""Structural invariants, bad input, degenerate rows, untouched inputs and poisoned outputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kernels
from kernels.driver import verify_into
from kernels.validation import MAX_DRAFT_TOKENS
from tests.kernels._batches import (
    DEVICE,
    Agreement,
    compare_to_reference,
    make_batch,
    reference_result,
    run_kernel,
)

SUMMARY_KERNEL = "_summarise_values_kernel"  # kernels/validation.py: the value check's launch


def assert_structure(batch, out, want_logprobs=False):
    ids, num, logprobs = out
    lengths = batch.lengths
    vocab = batch.target_logits.shape[1]
    assert ids.dtype == torch.int64 and num.dtype == torch.int32
    assert ids.shape == (len(lengths), max(lengths, default=0) + 1)
    drafts = batch.draft_token_ids.tolist()
    cu = batch.cu_num_draft_tokens.tolist()
    for r, k in enumerate(lengths):
        n = int(num[r])
        assert 1 <= n <= k + 1
        row = ids[r].tolist()
        assert row[: n - 1] == drafts[cu[r]: cu[r] + n - 1], "accepted prefix must equal the drafts"
        assert 0 <= row[n - 1] < vocab
        assert all(v == -1 for v in row[n:])
        if want_logprobs:
            assert logprobs.dtype == torch.float32
            assert torch.all(logprobs[r, n:] == 0.0) and torch.all(logprobs[r, :n] <= 1e-6)


@pytest.mark.interpreter
def test_invariants_inputs_unmodified_deterministic():
    batch = make_batch(21, lengths=[3, 0, 1], vocab=257, dtype=torch.bfloat16)
    before = batch.clone()
    for method in ("token", "block"):
        first = run_kernel(batch, method, want_logprobs=True)
        assert_structure(batch, first, want_logprobs=True)
        again = run_kernel(batch, method, want_logprobs=True)
        assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    for a, b in zip(batch.args(), before.args(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.interpreter
def test_poisoned_outputs_are_overwritten():
    batch = make_batch(22, lengths=[2, 0, 1], vocab=100)
    clean = run_kernel(batch, "block", want_logprobs=True)
    ids = torch.full((3, 3), 7777, dtype=torch.int64, device=DEVICE)
    num = torch.full((3,), -5, dtype=torch.int32, device=DEVICE)
    logprobs = torch.full((3, 3), float("nan"), device=DEVICE)
    verify_into(ids, num, logprobs, *batch.args(), batch.lengths, method="block", max_chunk_bytes=None)
    assert torch.equal(ids, clean[0]) and torch.equal(num, clean[1]) and torch.equal(logprobs, clean[2])


@pytest.mark.interpreter
@pytest.mark.parametrize("method", ["token", "block"])
def test_degenerate_rows_stay_in_range(method):
    """NaN rows, all -inf rows, q(x) = 0 and -1 draft ids: documented outcome, ids in [0, V)."""
    batch = make_batch(23, lengths=[2, 2, 1, 1], vocab=70, greedy_fraction=0.0)
    batch.temperature[3] = 0.0
    batch.target_logits[0, 5] = float("nan")
    batch.target_logits[3] = float("-inf")
    batch.draft_logits[1, batch.draft_token_ids[1]] = float("-inf")  # q(x) = 0
    batch.draft_token_ids[4] = -1
    batch.target_logits[batch.target_logits.shape[0] - 1] = float("nan")  # greedy NaN row
    for with_draft in (True, False):
        b = batch.clone()
        if not with_draft:
            b.draft_logits = None
        out = run_kernel(b, method, want_logprobs=True)
        ids, num, _ = out
        for r, k in enumerate(b.lengths):
            assert 1 <= int(num[r]) <= k + 1
            assert 0 <= int(ids[r, int(num[r]) - 1]) < 70
        assert int(num[2]) == 1  # request 2's only draft is -1: never accepted


def test_validate_rejects_bad_rows():
    batch = make_batch(24, lengths=[1], vocab=10)
    batch.target_logits[1] = float("-inf")
    with pytest.raises(ValueError, match="target_logits"):
        run_kernel(batch, "token", validate=True)
    batch = make_batch(24, lengths=[1], vocab=10)
    batch.draft_logits[0, 3] = float("nan")
    with pytest.raises(ValueError, match="draft_logits"):
        run_kernel(batch, "token", validate=True)


def _bad_inputs():
    base = make_batch(25, lengths=[2, 1], vocab=16)
    cases = []

    def case(name, **changes):
        b = base.clone()
        kwargs = {}
        for key, value in changes.items():
            if hasattr(b, key):
                setattr(b, key, value)
            else:
                kwargs[key] = value
        cases.append(pytest.param(b, kwargs, name, id=f"{name}-{len(cases)}"))

    t = base.target_logits
    case("target_logits", target_logits=t[:, :0])
    case("target_logits", target_logits=t.to(torch.float64))
    case("target_logits", target_logits=t[:-1])
    case("target_logits", target_logits=t.t().contiguous().t())
    case("draft_logits", draft_logits=base.draft_logits[:, :8])
    case("draft_logits", draft_logits=base.draft_logits.half())
    case("draft_token_ids", draft_token_ids=torch.tensor([0, 16, 3], device=DEVICE))
    case("draft_token_ids", draft_token_ids=torch.tensor([0, -2, 3], device=DEVICE))
    case("draft_token_ids", draft_token_ids=torch.tensor([0.0, 1.0, 3.0], device=DEVICE))
    case("cu_num_draft_tokens", cu_num_draft_tokens=torch.tensor([0, 2, 1], dtype=torch.int32, device=DEVICE))
    case("cu_num_draft_tokens", cu_num_draft_tokens=torch.tensor([1, 2, 3], dtype=torch.int32, device=DEVICE))
    case("cu_num_draft_tokens", cu_num_draft_tokens=torch.tensor([0, 2, 2], dtype=torch.int32, device=DEVICE))
    # the same value checks when chunk planning also copies cu back (a 1-byte budget)
    case("cu_num_draft_tokens", cu_num_draft_tokens=torch.tensor([0, 2, 1], dtype=torch.int32, device=DEVICE),
         max_chunk_bytes=1)
    case("draft_token_ids", draft_token_ids=torch.tensor([0, 16, 3], device=DEVICE), max_chunk_bytes=1)
    case("temperature", temperature=torch.tensor([1.0, -0.5], device=DEVICE))
    case("temperature", temperature=torch.tensor([float("nan"), 1.0], device=DEVICE))
    case("temperature", temperature=torch.tensor([1.0], device=DEVICE))
    case("seeds", seeds=torch.tensor([1], device=DEVICE))
    case("positions", positions=torch.tensor([1.0, 2.0], device=DEVICE))
    case("method", method="blocks")
    case("max_chunk_bytes", max_chunk_bytes=0)
    case("want_logprobs", want_logprobs="yes")
    case("draft_lengths", draft_lengths=[2, 2])
    return cases


@pytest.mark.parametrize("batch,kwargs,name", _bad_inputs())
def test_bad_input_raises_naming_the_argument(batch, kwargs, name, kernel_launches):
    method = kwargs.pop("method", "token")
    with pytest.raises(ValueError, match=name):
        kernels.rejection_sample(*batch.args(), method=method, **kwargs)
    # the value summary is the one launch allowed before the checks pass
    assert set(kernel_launches) <= {SUMMARY_KERNEL}, f"raised after a launch: {kernel_launches}"


@pytest.mark.parametrize("name", ["temperature", "seeds", "positions", "cu_num_draft_tokens"])
def test_sparse_one_element_tensors_raise_naming_the_argument(name, kernel_launches):
    """A one-element tensor has no stride to check, so only its layout tells a sparse one apart."""
    batch = make_batch(27, lengths=[0], vocab=16)
    if name == "cu_num_draft_tokens":
        batch = make_batch(27, lengths=[], vocab=16)
    setattr(batch, name, getattr(batch, name).to_sparse())
    with pytest.raises(ValueError, match=f"{name}: expected a dense"):
        kernels.rejection_sample(*batch.args())
    assert set(kernel_launches) <= {SUMMARY_KERNEL}, kernel_launches


@pytest.mark.parametrize("kwargs", [{}, {"max_chunk_bytes": 1}, {"draft_lengths": [2, 1]}])
def test_good_input_passes_the_checks(kwargs, kernel_launches):
    """The bad-input test can fail: the unmodified batch reaches the verification launches (one
    chunk, several chunks, host lengths)."""
    kernels.rejection_sample(*make_batch(25, lengths=[2, 1], vocab=16).args(), **kwargs)
    assert set(kernel_launches) - {SUMMARY_KERNEL}, kernel_launches


@pytest.mark.interpreter
@pytest.mark.parametrize("method", ["token", "block"])
def test_the_longest_supported_draft_matches_the_reference(method):
    """``MAX_DRAFT_TOKENS`` drafts (a 128-row decide tile) beside a short request, drafts equal to the
    target so the decisions run to the bonus row: the limit is not off by one."""
    batch = make_batch(31, lengths=[MAX_DRAFT_TOKENS, 2], vocab=16, family="shared", greedy_fraction=0.0)
    out = run_kernel(batch, method, want_logprobs=True)
    tally = Agreement()
    compare_to_reference(batch, method, out, reference_result(batch, method, True), tally)
    assert not tally.mismatches, tally.mismatches
    assert out[0].shape == (2, MAX_DRAFT_TOKENS + 1) and int(out[1][0]) == MAX_DRAFT_TOKENS + 1


@pytest.mark.parametrize("path", ["one chunk", "chunked", "host lengths", "plan"])
def test_a_draft_beyond_the_supported_longest_raises(path, kernel_launches):
    """One more draft than ``MAX_DRAFT_TOKENS`` on every path, the small plan's value check included
    (a good call of the same layout first): found on the H200, where a 2000-token draft left the
    decide launch compiling for minutes."""
    batch = make_batch(32, lengths=[MAX_DRAFT_TOKENS + 1, 1], vocab=16)
    kwargs = {"chunked": {"max_chunk_bytes": 1},
              "host lengths": {"draft_lengths": batch.lengths}}.get(path, {})
    if path == "plan":
        good = batch.clone()
        cu = [0, MAX_DRAFT_TOKENS, MAX_DRAFT_TOKENS + 2]  # same shapes, every draft within the limit
        good.cu_num_draft_tokens = torch.tensor(cu, dtype=torch.int32, device=DEVICE)
        for _ in range(2):
            kernels.rejection_sample(*good.args())
        kernel_launches.clear()
    name = "draft_lengths" if path == "host lengths" else "cu_num_draft_tokens"
    with pytest.raises(ValueError, match=f"{name}: a request has {MAX_DRAFT_TOKENS + 1} draft tokens"):
        kernels.rejection_sample(*batch.args(), **kwargs)
    assert set(kernel_launches) <= {SUMMARY_KERNEL}, f"raised after a launch: {kernel_launches}"


@pytest.mark.interpreter
@pytest.mark.parametrize("cu", [[0], [0, 0], [0, 3, 3, 4, 9]])
def test_value_summary_returns_the_lengths(cu):
    """The summary's longest draft, and the lengths it copies back only when asked."""
    from kernels.validation import check_values

    cu_t = torch.tensor(cu, dtype=torch.int32, device=DEVICE)
    ids = torch.zeros(cu[-1], dtype=torch.int64, device=DEVICE)
    temperature = torch.ones(len(cu) - 1, device=DEVICE)
    lengths = np.diff(cu)
    full = check_values(ids, cu_t, temperature, 16)
    assert full.max_draft_len == (lengths.max() if lengths.size else 0)
    assert np.array_equal(full.lengths, lengths)
    assert check_values(ids, cu_t, temperature, 16, want_lengths=False) == (full.max_draft_len, None)


def test_empty_batch():
    empty = torch.empty((0, 5), device=DEVICE)
    no_ids = torch.empty(0, dtype=torch.int64, device=DEVICE)
    cu = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    ids, num, lp = kernels.rejection_sample(empty, None, no_ids, cu, torch.empty(0, device=DEVICE), no_ids,
                                            no_ids.clone(), want_logprobs=True)
    assert ids.shape == (0, 1) and num.shape == (0,) and lp.shape == (0, 1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (compiled kernels)")
def test_cpu_tensors_on_a_gpu_machine_raise_before_any_launch():
    batch = make_batch(2, num_reqs=2, max_k=2, vocab=16, device="cpu")
    with pytest.raises(ValueError, match="target_logits: on cpu"):
        kernels.rejection_sample(*batch.args())


@pytest.mark.interpreter
def test_vocab_of_one_and_masked_tail():
    """V = 1 and V = block + 1 with all-negative logits: the padded tail never wins (BUGS.md 10)."""
    for vocab in (1, 257):
        batch = make_batch(26, lengths=[1, 0], vocab=vocab, greedy_fraction=0.0)
        batch.target_logits -= 1000.0
        batch.temperature[1] = 0.0
        ids, num, _ = run_kernel(batch, "token")
        assert int(ids.max()) < vocab and int(ids[ids >= 0].min()) >= 0
        if vocab == 1:
            assert ids[0].tolist() in ([0, -1], [0, 0]) and ids[1].tolist() == [0, -1]


def test_capture_verify_refuses_cpu_tensors_before_any_launch():
    """CUDA graphs need CUDA: a CPU batch gets a ValueError naming the argument."""
    batch = make_batch(8, num_reqs=2, max_k=2, vocab=16, device="cpu")
    with pytest.raises(ValueError, match="target_logits"):
        kernels.capture_verify(*batch.args(), draft_lengths=batch.lengths)


def test_capture_verify_requires_draft_lengths():
    batch = make_batch(8, num_reqs=2, max_k=2, vocab=16, device="cpu")
    with pytest.raises(ValueError, match="draft_lengths"):
        kernels.capture_verify(*batch.args(), draft_lengths=None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (pinned host memory)")
@pytest.mark.parametrize("path", ["copy", "refused"])
def test_value_summary_copy_fallback_matches_zero_copy(monkeypatch, path):
    """Where the launcher refuses a host pointer, the summary goes through a device buffer and one
    copy; both ways give the same summary, and a refusal switches the process to the copy."""
    from kernels import validation

    cu_t = torch.tensor([0, 3, 3, 4, 9], dtype=torch.int32, device="cuda")
    ids = torch.arange(9, dtype=torch.int64, device="cuda")
    temperature = torch.ones(4, device="cuda")
    direct = validation.check_values(ids, cu_t, temperature, 16)
    monkeypatch.setattr(validation, "_ZERO_COPY", path == "refused")
    if path == "refused":  # the launcher's own message for a pointer it cannot map
        kernel = validation._summarise_values_kernel
        message = "Pointer argument (at 3) cannot be accessed from Triton (cpu tensor?)"

        class Refusing:
            def __getitem__(self, grid):
                def launch(*args, **kwargs):
                    if not args[3].is_cuda:
                        raise ValueError(message)
                    return kernel[grid](*args, **kwargs)
                return launch

        monkeypatch.setattr(validation, "_summarise_values_kernel", Refusing())
    copied = validation.check_values(ids, cu_t, temperature, 16)
    assert copied.max_draft_len == direct.max_draft_len == 5
    assert np.array_equal(copied.lengths, direct.lengths)
    assert validation._ZERO_COPY is False
