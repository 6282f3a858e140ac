"""Golden files: a kernel's outputs on a deterministic case set, keyed by case descriptions.

Schema ``specfuzz-golden/1`` (JSON, gzip-compressed when the name ends in ``.gz``)::

    { "schema": "specfuzz-golden/1", "command": str, "kernel": SPEC, "kernel_name": str,
      "profile": str, "seed": int, "device": str, "versions": {...}, "commit": str,
      "created": ISO-8601, "seconds": float, "space": {"methods": [...], "dtypes": [...]},
      "cases": [ { "case": Case dict | {"crafted": label, "method": m, "dtype": d},
                   "input_sha": sha256 of the built batch (inputs are regenerated, never stored),
                   "draws_sha": sha256 of random_draws' bytes, or null (kernel has none),
                   "answer": { "ids": [[int]], "n": [int], "logprobs": base64 float32 | null,
                               "error": null | str } } ] }

Grid cases are stored as their ``harness.generation.cases.Case`` dicts (a few hundred bytes each). The
crafted cases of ``harness.generation.crafted`` carry explicit tensors (up to 260 KB each), so they are
stored by
label and rebuilt with ``crafted_cases(space.methods, space.dtypes)``; ``input_sha`` proves at
replay time that every rebuilt batch is the recorded one, bit for bit.

``Answer`` is what a kernel returned for one case, on the CPU: full ``output_token_ids`` rows
(padding included), ``num_emitted`` and ``logprobs`` (bits kept exactly), or the error it raised.
"""

from __future__ import annotations

import base64
import datetime as _dt
import gzip
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from harness.contract import VerifyBatch, VerifyOutput, has_random_draws
from harness.execution.kernel_calls import KernelRaised, call_random_draws, call_verify
from harness.generation.cases import DTYPES, Case, build_batch
from harness.generation.crafted import crafted_cases

SCHEMA = "specfuzz-golden/1"


@dataclass
class Answer:
    """One kernel output for one case (CPU tensors), or the error the kernel raised."""

    ids: torch.Tensor | None = None  # [num_reqs, width] int64
    num_emitted: torch.Tensor | None = None  # [num_reqs] int64
    logprobs: torch.Tensor | None = None  # [num_reqs, width] float32
    error: str | None = None

    @classmethod
    def of(cls, out: VerifyOutput) -> Answer:
        lp = None if out.logprobs is None else out.logprobs.detach().cpu().to(torch.float32)
        return cls(
            out.output_token_ids.detach().cpu().to(torch.int64),
            out.num_emitted.detach().cpu().to(torch.int64),
            lp,
        )

    def to_output(self) -> VerifyOutput:
        return VerifyOutput(self.ids, self.num_emitted.to(torch.int32), self.logprobs)

    def to_json(self) -> dict:
        if self.error is not None:
            return {"error": self.error}
        lp = None
        if self.logprobs is not None:
            lp = base64.b64encode(self.logprobs.contiguous().numpy().tobytes()).decode("ascii")
        return {"ids": self.ids.tolist(), "n": self.num_emitted.tolist(), "logprobs": lp}

    @classmethod
    def from_json(cls, d: dict) -> Answer:
        if d.get("error") is not None:
            return cls(error=d["error"])
        ids = torch.tensor(d["ids"], dtype=torch.int64).reshape(len(d["n"]), -1)
        lp = None
        if d.get("logprobs") is not None:
            arr = np.frombuffer(base64.b64decode(d["logprobs"]), dtype=np.float32).reshape(ids.shape)
            lp = torch.from_numpy(arr.copy())
        return cls(ids, torch.tensor(d["n"], dtype=torch.int64), lp)


@dataclass
class GoldenCase:
    case: Case
    stored: dict  # what the file holds for the case (its dict, or the crafted reference)
    input_sha: str
    draws_sha: str | None
    answer: Answer


@dataclass
class Golden:
    header: dict
    cases: list[GoldenCase] = field(default_factory=list)

    @property
    def num_requests(self) -> int:
        return sum(c.case.num_reqs for c in self.cases)


def batch_sha(batch: VerifyBatch) -> str:
    """sha256 over every input tensor's dtype, shape and bytes, and the scalar arguments."""
    h = hashlib.sha256()
    for t in (
        batch.target_logits,
        batch.draft_logits,
        batch.draft_token_ids,
        batch.cu_num_draft_tokens,
        batch.temperature,
        batch.seeds,
        batch.positions,
    ):
        if t is None:
            h.update(b"none")
            continue
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    h.update(f"{batch.method}|{batch.max_chunk_bytes}|{batch.want_logprobs}".encode())
    return h.hexdigest()


def draws_sha(accept, sample) -> str:
    h = hashlib.sha256()
    for t in (accept, sample):
        arr = (
            t.detach().cpu().to(torch.float32).contiguous().numpy()
            if isinstance(t, torch.Tensor)
            else np.ascontiguousarray(t, dtype=np.float32)
        )
        h.update(str(arr.shape).encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def run_kernel(kernel: object, batch: VerifyBatch) -> tuple[Answer, str | None, tuple | None]:
    """``(answer, draws sha or None, (accept, sample) or None)``; a kernel error becomes the answer."""
    draws = sha = None
    try:
        if has_random_draws(kernel):
            draws = call_random_draws(kernel, batch)
            sha = draws_sha(*draws)
        return Answer.of(call_verify(kernel, batch)), sha, draws
    except KernelRaised as exc:
        return Answer(error=f"{exc.what} raised {type(exc.error).__name__}: {exc.error}"), sha, draws


def stored_form(case: Case) -> dict:
    if case.tensors:  # a crafted case: rebuilt from its label
        return {"crafted": case.label, "method": case.method, "dtype": case.dtype}
    return case.to_dict()


def rebuild_cases(stored: list[dict], space: dict) -> list[Case]:
    """The ``Case`` of every stored entry (crafted ones rebuilt from ``harness.generation.crafted``)."""
    crafted = None
    out = []
    for d in stored:
        if "crafted" not in d:
            out.append(Case.from_dict(d))
            continue
        if crafted is None:
            dtypes = frozenset(DTYPES[n] for n in space["dtypes"])
            crafted = {(c.label, c.method, c.dtype): c for c in crafted_cases(space["methods"], dtypes)}
        key = (d["crafted"], d["method"], d["dtype"])
        if key not in crafted:
            raise ValueError(f"crafted case {key} no longer exists in harness.generation.crafted")
        out.append(crafted[key])
    return out


def record(
    kernel: object, cases: list[Case], device: torch.device, header: dict, progress=lambda s: None
) -> Golden:
    """Run ``kernel`` on every case and keep its answers (``header`` is completed and kept)."""
    t0 = time.perf_counter()
    golden = Golden(dict(header))
    for i, case in enumerate(cases):
        t_case = time.perf_counter()
        batch = build_batch(case, device)
        answer, sha, _ = run_kernel(kernel, batch)
        golden.cases.append(GoldenCase(case, stored_form(case), batch_sha(batch), sha, answer))
        progress(
            f"[{i + 1}/{len(cases)}] {time.perf_counter() - t_case:6.2f} s  {case.label or case.summary()}"
            + (f"  ERROR {answer.error}" if answer.error else "")
        )
    golden.header.update(
        schema=SCHEMA,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        seconds=round(time.perf_counter() - t0, 3),
    )
    return golden


def to_json(golden: Golden) -> dict:
    d = dict(golden.header)
    d["cases"] = [
        {"case": c.stored, "input_sha": c.input_sha, "draws_sha": c.draws_sha, "answer": c.answer.to_json()}
        for c in golden.cases
    ]
    return d


def save(golden: Golden, path: str | Path) -> int:
    """Write ``path`` (gzip when it ends in ``.gz``); returns its size in bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(to_json(golden), separators=(",", ":")).encode()
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return len(data)


def load(path: str | Path) -> Golden:
    """Read a golden file; raises ``ValueError`` on another schema or a vanished crafted case."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    d = json.loads(raw)
    if d.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {d.get('schema')!r}, expected {SCHEMA!r}")
    entries = d.pop("cases")
    cases = rebuild_cases([e["case"] for e in entries], d["space"])
    golden = Golden(d)
    for case, e in zip(cases, entries, strict=True):
        golden.cases.append(
            GoldenCase(case, e["case"], e["input_sha"], e.get("draws_sha"), Answer.from_json(e["answer"]))
        )
    return golden
