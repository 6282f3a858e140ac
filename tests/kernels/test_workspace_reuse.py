"""Workspace reuse (kernels/chunking.py ``reusable_workspace``): one kept workspace per thread, device and
stream, replaced when the layout changes; repeated calls on a kept workspace give the same results as
calls on fresh ones (its race counters are zeroed by every call, never trusted)."""

from __future__ import annotations

import threading

import torch

import kernels
from kernels.chunking import release_workspaces, reusable_workspace
from tests.kernels._batches import DEVICE, make_batch


def test_kept_per_layout_and_thread():
    release_workspaces()
    sizes = (9, 8, 1, 4, 8)
    first = reusable_workspace(sizes, torch.device(DEVICE))
    assert reusable_workspace(sizes, torch.device(DEVICE)) is first
    other = reusable_workspace((5, 4, 1, 4, 8), torch.device(DEVICE))
    assert other is not first
    assert reusable_workspace(sizes, torch.device(DEVICE)) is not first  # only the latest layout is kept
    seen = []
    worker = threading.Thread(target=lambda: seen.append(reusable_workspace(sizes, torch.device(DEVICE))))
    worker.start()
    worker.join()
    assert seen[0] is not reusable_workspace(sizes, torch.device(DEVICE))
    release_workspaces()
    assert reusable_workspace(sizes, torch.device(DEVICE)) is not seen[0]


def test_repeated_calls_on_a_kept_workspace_match_fresh_ones():
    batch = make_batch(57, lengths=[3, 0, 5, 2], vocab=700, greedy_fraction=0.25, with_draft=True)
    for method in ("token", "block"):
        release_workspaces()
        fresh = kernels.rejection_sample(*batch.args(), method=method, want_logprobs=True)
        for _ in range(3):  # the same layout: the kept workspace, with the previous call's counters
            again = kernels.rejection_sample(*batch.args(), method=method, want_logprobs=True)
            for a, b in zip(fresh, again, strict=True):
                assert torch.equal(a, b), (method, a, b)
