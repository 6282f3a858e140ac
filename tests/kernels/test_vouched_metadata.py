"""``draft_lengths`` skips the value check, so the kernels see whatever ``cu`` the caller vouched for.
docs/kernels.md promises that even then no kernel reads or writes outside its buffers and every
emitted id lies in ``[0, V)``. These tests give wrong ``cu`` arrays (decreasing, past the end,
negative, wider than the output) and check guard words around every workspace view and output
buffer, plus the structure of the outputs. Before the kernels clamped each request's span, the
first case corrupted the heap under the interpreter ("double free or corruption").
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.execution.guard_bands import guarded_copy
from kernels import driver
from kernels.chunking import Workspace
from tests.kernels._batches import DEVICE, make_batch

# (vouched host lengths, the device cu the kernels see instead)
WRONG_CU = {
    "decreasing": ([2, 2], [0, 5, 4]),
    "past-end": ([1, 2, 1], [0, 3, 9, 11]),
    "negative": ([2, 1, 1], [0, -6, 2, 4]),
    "wider-than-output": ([1, 1, 2], [0, 0, 4, 4]),
    "offset-start": ([2, 2], [3, 5, 7]),  # valid: the kernels read cu relative to cu[0]
}


class Guarded:
    """Every buffer handed to the kernels, each a view inside ``harness.execution.guard_bands`` guard regions
    (at least 64 elements on each side; the wrong spans below land within that)."""

    def __init__(self):
        self.buffers = []

    def tensor(self, shape, dtype):
        sentinel = -12345.5 if dtype.is_floating_point else -777
        empty = torch.empty(shape, dtype=dtype, device=DEVICE)
        guarded = guarded_copy(empty, sentinel, fill_view_with=sentinel)
        self.buffers.append(guarded)
        return guarded.view

    def breaches(self) -> list[int]:
        """Indices of the buffers whose guard regions changed."""
        return [i for i, guarded in enumerate(self.buffers) if not guarded.intact()]


def run_guarded(batch, lengths, wrong_cu, method, monkeypatch, max_chunk_bytes=None):
    """``verify_into`` with the wrong ``cu``, guarded workspace and outputs; returns (ids, num).
    ``max_chunk_bytes=1`` runs one request per chunk (slices of the wrong ``cu``)."""
    guard = Guarded()
    monkeypatch.setattr(driver, "reusable_workspace", lambda sizes, device: guarded_workspace(guard, sizes))
    num_reqs, width = len(lengths), max(lengths) + 1
    out_ids = guard.tensor((num_reqs, width), torch.int64)
    out_num = guard.tensor((num_reqs,), torch.int32)
    out_logprobs = guard.tensor((num_reqs, width), torch.float32)
    args = list(batch.args())
    args[3] = torch.tensor(wrong_cu, dtype=torch.int32, device=DEVICE)
    driver.verify_into(out_ids, out_num, out_logprobs, *args, lengths, method=method,
                       max_chunk_bytes=max_chunk_bytes)
    assert guard.breaches() == [], "a kernel wrote outside its buffer"
    return out_ids.cpu().numpy(), out_num.cpu().numpy()


def guarded_workspace(guard: Guarded, sizes) -> Workspace:
    """A Workspace whose every view has guard words around it."""
    plain = Workspace.allocate(*sizes, DEVICE)
    fields = {}
    for f in dataclasses.fields(Workspace):
        value = getattr(plain, f.name)
        if isinstance(value, torch.Tensor):
            fields[f.name] = guard.tensor(tuple(value.shape), value.dtype)
    return dataclasses.replace(plain, buffers=(), **fields)


@pytest.mark.interpreter
@pytest.mark.parametrize("case", sorted(WRONG_CU))
@pytest.mark.parametrize("method,with_draft", [("token", True), ("block", True), ("block", False)])
@pytest.mark.parametrize("max_chunk_bytes", [None, 1])
def test_wrong_vouched_cu_stays_in_bounds(case, method, with_draft, max_chunk_bytes, monkeypatch):
    lengths, wrong_cu = WRONG_CU[case]
    seed = 97
    print(f"seed={seed} case={case}")
    batch = make_batch(seed, lengths=lengths, vocab=40, with_draft=with_draft, greedy_fraction=0.3)
    ids, num = run_guarded(batch, lengths, wrong_cu, method, monkeypatch, max_chunk_bytes)
    width = max(lengths) + 1
    assert ((num >= 1) & (num <= width)).all(), num
    for r in range(len(lengths)):
        assert ((ids[r, :num[r]] >= 0) & (ids[r, :num[r]] < 40)).all(), ids
        assert (ids[r, num[r]:] == -1).all(), ids


@pytest.mark.interpreter
@pytest.mark.parametrize("method", ["token", "block"])
def test_wrong_vouched_cu_never_emits_past_the_width(method, monkeypatch):
    """Greedy rows whose drafts are all accepted: a request that ``cu`` says has 4 drafts, in an
    output 3 wide, emits 3 tokens (its span is clamped), not 5 past the end of its row."""
    lengths, wrong_cu = [1, 1, 2], [0, 0, 4, 4]
    batch = make_batch(5, lengths=lengths, vocab=40, greedy_fraction=1.0)
    batch.target_logits[:, 7] = 50.0  # token 7 is every row's argmax, and every draft
    batch.draft_token_ids.fill_(7)
    ids, num = run_guarded(batch, lengths, wrong_cu, method, monkeypatch)
    assert num.tolist() == [1, 3, 1], num
    assert ids.tolist() == [[7, -1, -1], [7, 7, 7], [7, -1, -1]], ids


@pytest.mark.interpreter
@pytest.mark.parametrize("case", ["decreasing", "past-end", "negative"])
def test_rejected_cu_leaves_the_workspace_intact(case, monkeypatch):
    """On the default path the value summary writes the row table before the check rejects ``cu``:
    those writes stay inside the (guarded) workspace too."""
    import kernels

    lengths, wrong_cu = WRONG_CU[case]
    batch = make_batch(98, lengths=lengths, vocab=40)
    guard = Guarded()
    monkeypatch.setattr(driver, "reusable_workspace", lambda sizes, device: guarded_workspace(guard, sizes))
    args = list(batch.args())
    args[3] = torch.tensor(wrong_cu, dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match="cu_num_draft_tokens"):
        kernels.rejection_sample(*args)
    assert guard.buffers, "the summary did not write a table into the guarded workspace"
    assert guard.breaches() == [], "the value summary wrote outside the workspace"
