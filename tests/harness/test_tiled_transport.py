"""Tiled tensors cross to the worker as their source and a count (harness/execution/transport.py).

The statistical layer's replicated batches reach 2 GiB on a GPU; shipped whole through host memory
and the worker's pipe they cost seconds per call (the first-token law of FlashInfer and SGLang ran
at 10-14 ms per request on an H100). Each test checks one half of the contract: what travels is
small, and what arrives is byte for byte what a whole copy would have been.
"""

from __future__ import annotations

import gc
import pickle

import torch

from harness.execution import transport
from harness.execution.transport import (
    Packer,
    Tiled,
    as_storage,
    changed_storages,
    snapshot,
    tiled,
    unpack,
)
from harness.generation.cases import Case, build_batch
from harness.properties.statistical_sampling import replicate


def _far(tree, table):
    storages = [as_storage(data, device) for device, data in table]
    return unpack(tree, storages), storages


def test_a_tiled_tensor_travels_as_its_source_and_arrives_equal():
    source = torch.randn(3, 1000).to(torch.bfloat16)
    batch = {"rows": tiled(source, 200), "view": None}
    batch["view"] = batch["rows"][7:9, 10:]  # a view of the same storage travels with it
    assert torch.equal(batch["rows"], source.repeat(200, 1))
    packer = Packer()
    tree = packer.pack(batch)
    (_, data), = packer.table()
    assert isinstance(data, Tiled) and data.times == 200 and len(data.unit) == source.numel() * 2
    assert len(pickle.dumps(packer.table())) < 2 * len(data.unit)  # not the 1.2 MB of the batch
    got, _ = _far(tree, packer.table())
    assert torch.equal(got["rows"], batch["rows"]) and got["rows"].stride() == batch["rows"].stride()
    assert torch.equal(got["view"], batch["view"]) and got["view"].storage_offset() == 7 * 1000 + 10


def test_a_tiled_tensor_changed_after_it_was_made_travels_whole():
    rows = tiled(torch.randn(2, 64), 10)
    rows[5, 3] = 123.0  # no longer a tiling: it must travel as bytes, or the worker sees other logits
    packer = Packer()
    tree = packer.pack(rows)
    (_, data), = packer.table()
    assert isinstance(data, bytes)
    got, _ = _far(tree, packer.table())
    assert torch.equal(got, rows)


def test_a_kernel_that_writes_into_a_tiled_input_is_seen():
    packer = Packer()
    tree = packer.pack(tiled(torch.randn(1, 32), 8))
    table = packer.table()
    got, far = _far(tree, table)
    before = snapshot(far, table)
    assert changed_storages(before, far) == []
    got[2, 0] = -5.0  # the kernel modifies its input in place: the harness must learn of it
    assert changed_storages(before, far) == [0]


def test_replicated_batches_ship_one_request_and_the_registry_forgets_dead_tensors():
    case = Case(vocab_size=4000, draft_lens=[3], temperatures=[0.7], seeds=[5], positions=[2])
    base = build_batch(case)
    batch = replicate(base, 300)
    packer = Packer()
    packer.pack(batch)
    shipped = sum(len(d.unit) if isinstance(d, Tiled) else len(d) for _, d in packer.table())
    one_request = base.target_logits.nbytes + base.draft_logits.nbytes
    assert shipped < 2 * one_request < batch.target_logits.nbytes  # 300 requests' logits: 2 x 4.8 MB
    keys = {transport._storage_key(t) for t in (batch.target_logits, batch.draft_logits)}
    assert keys <= transport._TILINGS.keys()
    del batch, packer
    gc.collect()
    assert not keys & transport._TILINGS.keys()
