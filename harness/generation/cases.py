"""A self-contained, JSON-able description of one batch, and its round trip to ``VerifyBatch``.

A case is a recipe: sizes, per-request temperatures/seeds/positions, the logit family and the seed the
bulk arrays are drawn from (harness/generation/logit_families.py). It rebuilds the identical batch on any
device.
When a batch did not come from a recipe (a transformed or hand-made batch), ``case_from_batch``
stores the tensors themselves under ``"tensors"`` (exact bytes, base64), which override the recipe.
Reports, reproduction commands and the regression corpus all carry cases in this form.
"""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import torch

from harness.contract import BATCH_TENSOR_FIELDS, VerifyBatch
from harness.generation.logit_families import generate

CASE_VERSION = 1
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Case:
    vocab_size: int
    draft_lens: list[int]
    temperatures: list[float]
    seeds: list[int]
    positions: list[int]
    family: str = "gaussian"
    scale: float = 1.0
    dtype: str = "float32"
    has_draft_logits: bool = True
    data_seed: int = 0
    method: str = "token"
    max_chunk_bytes: int | None = None
    want_logprobs: bool = False
    tensors: dict = field(default_factory=dict)  # explicit tensors overriding the recipe
    label: str = ""  # what was done to the case, for people (e.g. the malformation applied)
    version: int = CASE_VERSION

    @property
    def num_reqs(self) -> int:
        return len(self.draft_lens)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for optional in ("tensors", "label"):
            if not d[optional]:
                d.pop(optional)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown case fields {sorted(unknown)}")
        if d.get("version", CASE_VERSION) != CASE_VERSION:
            raise ValueError(f"case version {d.get('version')} is not {CASE_VERSION}")
        return cls(**d)

    def summary(self) -> str:
        """One line for progress output and reports."""
        temps = ",".join(f"{t:g}" for t in self.temperatures)
        return (
            f"V={self.vocab_size} k={self.draft_lens} T=[{temps}] {self.family}x{self.scale:g} "
            f"{self.dtype} {'q' if self.has_draft_logits else 'point-mass'} {self.method} "
            f"chunk={self.max_chunk_bytes}"
        )


def encode_tensor(t: torch.Tensor) -> dict[str, Any]:
    """Exact, JSON-able encoding (bfloat16/float16 are widened to float32, which is exact)."""
    dtype = str(t.dtype).removeprefix("torch.")
    arr = t.detach().cpu()
    if arr.dtype in (torch.bfloat16, torch.float16):
        arr = arr.float()
    arr = arr.contiguous().numpy()
    return {
        "dtype": dtype,
        "shape": list(arr.shape),
        "numpy": arr.dtype.str,
        "b64": base64.b64encode(arr.tobytes()).decode("ascii"),
    }


def decode_tensor(d: dict[str, Any], device: torch.device | str = "cpu") -> torch.Tensor:
    arr = np.frombuffer(base64.b64decode(d["b64"]), dtype=np.dtype(d["numpy"])).reshape(d["shape"])
    t = torch.from_numpy(arr.copy())
    return t.to(dtype=getattr(torch, d["dtype"])).to(device)


def build_batch(case: Case, device: torch.device | str = "cpu") -> VerifyBatch:
    """The ``VerifyBatch`` a case describes, with every tensor on ``device``."""
    dtype = DTYPES[case.dtype]
    explicit = case.tensors or {}
    if "target_logits" in explicit:
        target = draft = ids = None
    else:
        arrays = generate(
            case.family,
            case.scale,
            case.vocab_size,
            case.draft_lens,
            case.temperatures,
            case.has_draft_logits,
            case.data_seed,
        )
        target = torch.from_numpy(arrays.target).to(dtype)
        draft = None if arrays.draft is None else torch.from_numpy(arrays.draft).to(dtype)
        ids = torch.from_numpy(arrays.draft_token_ids)
    cu = torch.tensor(np.concatenate([[0], np.cumsum(case.draft_lens)]).astype(np.int32))
    built = {
        "target_logits": target,
        "draft_logits": draft,
        "draft_token_ids": ids,
        "cu_num_draft_tokens": cu,
        "temperature": torch.tensor(case.temperatures, dtype=torch.float32),
        "seeds": torch.tensor(case.seeds, dtype=torch.int64),
        "positions": torch.tensor(case.positions, dtype=torch.int64),
    }
    for name, enc in explicit.items():
        built[name] = None if enc is None else decode_tensor(enc)
    built = {k: None if v is None else v.to(device) for k, v in built.items()}
    return VerifyBatch(
        **built, method=case.method, max_chunk_bytes=case.max_chunk_bytes, want_logprobs=case.want_logprobs
    )


def case_from_batch(batch: VerifyBatch) -> Case:
    """A case that stores ``batch``'s tensors verbatim (for batches that have no recipe)."""
    lengths = batch.draft_lengths() if batch.cu_num_draft_tokens.dim() == 1 else []
    tensors = {
        name: (None if getattr(batch, name) is None else encode_tensor(getattr(batch, name)))
        for name in BATCH_TENSOR_FIELDS
    }
    dtype = str(batch.target_logits.dtype).removeprefix("torch.")
    return Case(
        vocab_size=int(batch.target_logits.shape[-1]),
        draft_lens=lengths,
        temperatures=[float(x) for x in batch.temperature.flatten().tolist()],
        seeds=[int(x) for x in batch.seeds.flatten().tolist()],
        positions=[int(x) for x in batch.positions.flatten().tolist()],
        family="explicit",
        dtype=dtype if dtype in DTYPES else "float32",
        has_draft_logits=batch.draft_logits is not None,
        method=batch.method,
        max_chunk_bytes=batch.max_chunk_bytes,
        want_logprobs=batch.want_logprobs,
        tensors=tensors,
    )
