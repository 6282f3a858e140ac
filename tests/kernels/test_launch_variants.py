"""``driver.launch_variant`` must determine every Triton specialisation of the launches it keys
(kernels/launch.py trusts it and skips the per-argument key). Checked on the CPU without launching:
every launch ``verify_into`` makes over many layouts is recorded, and launches that share (kernel,
variant, constexprs) must share ``FastLaunch.spec_key`` (what Triton specialises per argument). On a
GPU the same claim is checked on every real launch (``SPECFUZZ_FAST_LAUNCH_CHECK=1`` in conftest)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from kernels import driver, launch, tuning
from kernels.chunking import release_workspaces
from tests.kernels._batches import make_batch

SEED = 20261201


def _record_launches(monkeypatch, variant_fn=None):
    records = []

    def record(self, grid, args, kwargs, variant=None):
        records.append((self, args, kwargs, variant))

    monkeypatch.setattr(launch.FastLaunch, "launch", record)
    if variant_fn is not None:
        monkeypatch.setattr(driver, "launch_variant", variant_fn)
    return records


def _layouts():
    """Dtypes, vocabularies (multiples of 16 or not), metadata int widths, and budgets that slice the
    batch into chunks starting at unaligned rows."""
    gen = np.random.default_rng(SEED)
    for i, (dtype, vocab, meta, budget, with_draft, method) in enumerate(itertools.product(
            (torch.float32, torch.bfloat16), (16, 333, 64), (torch.int32, torch.int64), (None, 1),
            (True, False), ("token", "block"))):
        lengths = [int(k) for k in gen.integers(0, 4, 5)]
        batch = make_batch(SEED + i, lengths=lengths, vocab=vocab, dtype=dtype, with_draft=with_draft)
        args = list(batch.args())
        for j in (2, 3, 5, 6):  # draft ids, cu, seeds, positions
            args[j] = args[j].to(meta)
        yield args, lengths, budget, method


def _run_all(records):
    for args, lengths, budget, method in _layouts():
        release_workspaces()
        width = max(lengths) + 1
        dev = args[0].device
        out_ids = torch.empty((len(lengths), width), dtype=torch.int64, device=dev)
        out_num = torch.empty(len(lengths), dtype=torch.int32, device=dev)
        out_logprobs = torch.empty((len(lengths), width), dtype=torch.float32, device=dev)
        driver.verify_into(out_ids, out_num, out_logprobs, *args, np.asarray(lengths), method=method,
                           max_chunk_bytes=budget)
    conflicts, keys = [], {}
    for kernel, args, kwargs, variant in records:
        if variant is None:
            continue
        group = (id(kernel), variant, tuple(kwargs.items()))
        spec = kernel.spec_key(args)
        if keys.setdefault(group, spec) != spec:
            conflicts.append((getattr(kernel.fn, "__name__", "?"), variant, keys[group], spec))
    return conflicts


def test_every_variant_determines_the_specialisation(monkeypatch):
    records = _record_launches(monkeypatch)
    conflicts = _run_all(records)
    assert sum(v is not None for *_, v in records) > 500  # the driver keyed (almost) every launch
    assert not conflicts, conflicts[:3]


@pytest.mark.parametrize("dropped", ["alignment", "metadata dtypes"])
def test_a_variant_missing_a_field_is_caught(monkeypatch, dropped):
    """The same check against deliberately incomplete variants: it must report conflicts."""
    full = driver.launch_variant

    def incomplete(*args):
        v = full(*args)
        return v[:6] + v[8:] if dropped == "alignment" else v[:2] + v[6:]

    records = _record_launches(monkeypatch, incomplete)
    assert _run_all(records)


@pytest.mark.parametrize("prune", [False, True])
def test_a_pruned_race_launches_with_its_own_warps_and_cap(monkeypatch, kernel_setting, prune):
    """A pruned race runs ``PRUNED_RACE_WARPS`` warps capped at ``PRUNED_RACE_MAXNREG`` registers (v22:
    32 lanes a thread), an unpruned one the race's own (8 warps, 64 registers). Launches are recorded,
    not run, so the GPU's 4096-lane race blocks can be asked for under the interpreter too."""
    from kernels.residual_sample import _race_blocks_kernel

    kernel_setting(tuning, "RACE_PRUNE_MIN_ENTRIES", 0 if prune else 1 << 62)
    kernel_setting(tuning, "RACE_BLOCK_V", 4096)
    records = _record_launches(monkeypatch)
    lengths = [1, 2, 0, 3, 1]  # 5 requests x 64 blocks: no block halving (race_block_size)
    batch = make_batch(SEED, lengths=lengths, vocab=1 << 18, dtype=torch.bfloat16, with_draft=True)
    release_workspaces()
    dev = batch.target_logits.device
    driver.verify_into(torch.empty((len(lengths), max(lengths) + 1), dtype=torch.int64, device=dev),
                       torch.empty(len(lengths), dtype=torch.int32, device=dev), None, *batch.args(),
                       np.asarray(lengths), method="token", max_chunk_bytes=None)
    races = [kwargs for kernel, _, kwargs, _ in records if kernel is _race_blocks_kernel]
    assert [(k["BLOCK_V"], k["PRUNE"], k["num_warps"], k.get("maxnreg")) for k in races] == [
        (4096, prune, 4 if prune else 8, 72 if prune else 64)]


def test_pruning_is_decided_per_chunk(monkeypatch, kernel_setting):
    """Pruning counts the raced entries of each chunk, not of the whole batch: with the threshold at
    3 requests' worth, a batch of 5 requests chunked by a budget prunes only its chunks of 3 or more
    requests. (Launches are recorded, not run.)"""
    from kernels.residual_sample import _race_blocks_kernel

    kernel_setting(tuning, "FUSE_DECIDE_MAX_REQS", 0)  # every chunk through the separate launches
    vocab = 1000
    kernel_setting(tuning, "RACE_PRUNE_MIN_ENTRIES", 3 * vocab)
    records = _record_launches(monkeypatch)
    lengths = [1, 1, 1, 1, 1]
    batch = make_batch(SEED, lengths=lengths, vocab=vocab, dtype=torch.float32, with_draft=True)
    geo = tuning.geometry(vocab, len(lengths), 2)
    row_bytes = driver.workspace_bytes_per_logit_row(geo.num_vblocks, geo.race_blocks)
    for budget, expected in ((None, [True]), (6 * row_bytes, [True, False]), (2 * row_bytes, [False] * 5)):
        records.clear()
        release_workspaces()
        dev = batch.target_logits.device
        driver.verify_into(torch.empty((5, 2), dtype=torch.int64, device=dev),
                           torch.empty(5, dtype=torch.int32, device=dev), None, *batch.args(), lengths,
                           method="token", max_chunk_bytes=budget)
        pruned = [kwargs["PRUNE"] for kernel, _, kwargs, _ in records if kernel is _race_blocks_kernel]
        assert pruned == expected, (budget, pruned)
