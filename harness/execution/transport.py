"""Kernel-call arguments and results between the harness and its worker process, moved faithfully.

``pack(obj)`` replaces every torch tensor inside ``obj`` (nested in dataclasses, tuples, lists and
dicts; anything else is left to pickle) by a ``TensorRef`` naming a storage of a table, its offset,
shape, stride and dtype. Each storage travels once as bytes, whole, so on the far side:

- a tensor has the same device, dtype, shape, strides and storage offset as on the near side;
- views of one storage are views of one storage again, and the memory around a view travels with
  it: the guard bands of harness/execution/guard_bands.py keep working, and a write outside a view lands in
  the copied guard where the harness sees it once the storage comes back;
- CUDA storages cross through host memory (copied to the host for the pipe, back to the device of
  the same index on the other side): only bytes move, never CUDA IPC handles, so a worker whose CUDA
  context dies cannot take the harness's memory with it.

After a call, ``changed_storages`` names the argument storages whose bytes the call modified; the
worker sends those back and ``write_back`` copies them into the harness's own storages in place, so a
kernel that modifies its inputs, or writes into its caller's output buffers (``verify_into``), is
seen exactly as in one process. A result packed with the argument storages as ``known`` refers to
them by index: a result that aliases an argument comes back as a view of the harness's own tensor.

A tensor made by ``tiled(source, times)`` (``source.repeat(times, 1, ...)``: the statistical layer's
replicated requests, up to 2 GiB a batch) travels as its source's bytes and a count, and the worker
repeats them on its device: moving 2 GiB through host memory and the pipe took seconds per call. It
is shipped so only while its storage still holds exactly that tiling (checked on its device when the
call is packed); otherwise, and for every other tensor, the whole storage travels.
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TensorRef:
    """Where a tensor lives in a storage table: ``storage`` is an index into it."""

    storage: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


@dataclass(frozen=True)
class Tiled:
    """A storage's bytes as ``unit`` repeated ``times`` times (what ``tiled`` made)."""

    unit: bytes
    times: int


# storage key -> (the tensor ``tiled`` returned, its source's bytes as uint8 on its device, times)
_TILINGS: dict[tuple, tuple[weakref.ref, torch.Tensor, int]] = {}


def _storage_key(t: torch.Tensor) -> tuple:
    """Which storage ``t`` lives in: the packer's table index and the tilings are keyed by it."""
    storage = t.untyped_storage()
    return (str(t.device), storage.data_ptr(), storage.nbytes())


def tiled(source: torch.Tensor, times: int) -> torch.Tensor:
    """``source.repeat(times, 1, ...)`` (a fresh contiguous tensor), remembered as a tiling of
    ``source``'s bytes so that a supervised call ships ``source`` once (module docstring)."""
    out = source.repeat(times, *([1] * (source.dim() - 1)))
    unit_bytes = source.numel() * source.element_size()
    if times > 1 and unit_bytes and out.untyped_storage().nbytes() == unit_bytes * times:
        unit = source.contiguous().reshape(-1).view(torch.uint8).clone()
        key = _storage_key(out)
        _TILINGS[key] = (weakref.ref(out, lambda _, key=key: _TILINGS.pop(key, None)), unit, times)
    return out


def tiling_of(storage: torch.Tensor) -> Tiled | None:
    """``Tiled`` for a whole-storage uint8 view that ``tiled`` made and whose bytes are still that
    tiling (compared on its device), else None."""
    entry = _TILINGS.get(_storage_key(storage))
    if entry is None or entry[0]() is None:
        return None
    _, unit, times = entry
    if storage.numel() != unit.numel() * times or not torch.equal(
        storage.view(times, unit.numel()), unit.view(1, -1).expand(times, -1)
    ):
        return None
    return Tiled(unit.cpu().numpy().tobytes(), times)


def storage_bytes(storage: torch.Tensor) -> bytes:
    """The bytes of a uint8 storage view, copied to the host."""
    return storage.cpu().numpy().tobytes() if storage.numel() else b""


def as_storage(data: bytes | Tiled, device: str) -> torch.Tensor:
    """A fresh uint8 storage view holding ``data`` on ``device`` (a ``Tiled`` repeated there)."""
    if isinstance(data, Tiled):
        return as_storage(data.unit, device).repeat(data.times)
    host = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    return host if device == "cpu" else host.to(device)


def whole_storage(t: torch.Tensor) -> torch.Tensor:
    """A uint8 tensor over the whole storage of ``t`` (shares memory with it)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


class Packer:
    """Collects the storages of the tensors it packs; ``known`` storages are referred to by index."""

    def __init__(self, known: list[torch.Tensor] | None = None):
        self.storages: list[torch.Tensor] = list(known or [])
        self.first_new = len(self.storages)
        self._index = {_storage_key(s): i for i, s in enumerate(self.storages)}

    def _ref(self, t: torch.Tensor) -> TensorRef:
        u8 = whole_storage(t)
        key = _storage_key(u8)
        if key not in self._index or key[1] == 0:  # zero-size storages are never shared
            self._index[key] = len(self.storages)
            self.storages.append(u8)
        return TensorRef(
            self._index[key],
            str(t.dtype).removeprefix("torch."),
            tuple(t.shape),
            tuple(t.stride()),
            t.storage_offset(),
        )

    def pack(self, obj):
        if isinstance(obj, torch.Tensor):
            return self._ref(obj)
        if isinstance(obj, (list, tuple)):
            packed = [self.pack(x) for x in obj]
            return packed if isinstance(obj, list) else tuple(packed)
        if isinstance(obj, dict):
            return {k: self.pack(v) for k, v in obj.items()}
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return _with_fields(obj, self.pack)
        return obj

    def table(self) -> list[tuple[str, bytes | Tiled]]:
        """``(device, bytes or Tiled)`` of the storages this packer added (not the ``known`` ones)."""
        return [(str(s.device), tiling_of(s) or storage_bytes(s)) for s in self.storages[self.first_new :]]


def _with_fields(obj, fn):
    """A shallow copy of a dataclass instance with ``fn`` applied to every field (frozen ones too)."""
    new = copy.copy(obj)
    for f in dataclasses.fields(obj):
        object.__setattr__(new, f.name, fn(getattr(obj, f.name)))
    return new


def unpack(obj, storages: list[torch.Tensor]):
    """Inverse of ``Packer.pack``: ``TensorRef``s become tensors over ``storages`` (uint8 views)."""
    if isinstance(obj, TensorRef):
        u8 = storages[obj.storage]
        empty = torch.empty(0, dtype=getattr(torch, obj.dtype), device=u8.device)
        return empty.set_(u8.untyped_storage(), obj.offset, obj.shape, obj.stride)
    if isinstance(obj, (list, tuple)):
        out = [unpack(x, storages) for x in obj]
        return out if isinstance(obj, list) else tuple(out)
    if isinstance(obj, dict):
        return {k: unpack(v, storages) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _with_fields(obj, lambda v: unpack(v, storages))
    return obj


def snapshot(storages: list[torch.Tensor], table: list[tuple[str, bytes | Tiled]]) -> list:
    """What ``changed_storages`` compares with: the bytes received for a host storage (no copy unless
    it came tiled), a device-side clone for a CUDA one."""
    return [
        s.clone() if s.device.type != "cpu" else data if isinstance(data, bytes) else storage_bytes(s)
        for s, (_, data) in zip(storages, table, strict=True)
    ]


def changed_storages(before: list, after: list[torch.Tensor]) -> list[int]:
    """Indices whose bytes differ from their ``snapshot``. Host storages are compared as bytes, not
    with torch ops: a worker's intra-op threads on a loaded machine made a 1 MB compare take 50 ms."""
    return [
        i
        for i, (a, b) in enumerate(zip(before, after, strict=True))
        if (storage_bytes(b) != a if isinstance(a, bytes) else not torch.equal(a, b))
    ]


def write_back(storages: list[torch.Tensor], changed: dict[int, bytes]) -> None:
    """Copy the bytes a call left in the worker's storages into the harness's own, in place."""
    for i, data in changed.items():
        storages[i].copy_(as_storage(data, "cpu").to(storages[i].device))
