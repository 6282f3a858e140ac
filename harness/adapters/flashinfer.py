"""FlashInfer's ``chain_speculative_sampling`` as a kernel under test, imported from an installed
``flashinfer-python`` (nothing of FlashInfer is copied here).

Kernel: ``harness.adapters.flashinfer:chain`` -- token verification of chains, CUDA only.

What the published 0.7.4 package does (read from its wheel; paths inside the ``flashinfer`` package):

- ``sampling.py``, ``chain_speculative_sampling(draft_probs [B, n, V], draft_token_ids [B, n],
  target_probs [B, n + 1, V], maybe_output_accepted_token_num=None,
  maybe_output_emitted_draft_token_num=None, deterministic=True, generator=None, seed=None,
  offset=None) -> (output_token_ids [B, n + 1] int32, accepted [B], emitted [B])``. Probabilities,
  not logits (cast to float32, ids to int32); one draft length ``n`` per call; the two counters are
  ADDED to in place (fresh zeros when not given). ``seed`` / ``offset``: ints, or int64 tensors of
  length 1 or ``B`` (one per output row).
- ``data/include/flashinfer/sampling.cuh``, kernel ``ChainSpeculativeSampling``: one CUDA block per
  row ``b``; ``curand_init(seed[b], subsequence=b, offset[b])`` (Philox4_32_10), so the random stream
  depends on the row's batch slot as well as its seed and offset (the docstring says so: per-row
  seeds do not make sampling batch-invariant). Draft ``i`` is accepted iff ``u * p(x) < q(x)``
  (``p`` draft, ``q`` target, ``u = curand_uniform`` in (0, 1], so ``u == 1.0`` is possible); after
  the first rejection at ``pos`` it samples from ``relu(target[pos] - draft[pos])`` (the bonus row
  ``target[n]`` alone when all are accepted) by inverse CDF, pads with ``-1``. The draft id is used
  as an index without a check (``target_probs[row * d + draft_id]``: flashinfer#879 for ``-1``). When
  the residual is all zero, no entry is valid and the correction written is ``last_valid_id = -1``.
- ``softmax(logits, temperature=tensor)``: float32 probabilities of ``logits / T`` per row.

The mapping from ``VerifyBatch`` (one call per distinct draft length, requests in batch order):

- target rows: ``softmax(target_logits, temperature=T)`` of the request's ``k + 1`` rows; a greedy
  request (``T == 0``; FlashInfer has no greedy path) gets one-hot rows at ``argmax`` of the raw
  logits (torch: the first maximal index) and one-hot drafts, so it accepts a draft iff it is the
  argmax and its correction is the argmax;
- drafts: ``softmax(draft_logits, temperature=T)``, or one-hot rows at the draft ids for point-mass
  drafts (a ``-1`` id gets an all-zero row, and is passed on as it is);
- randomness: ``seed = seeds[r]`` and ``offset = positions[r]`` as int64 tensors, so a call is a
  deterministic function of the batch (never of a global generator);
- output: the ``[B, n + 1]`` ids of each group are written into ``[R, max_k + 1]`` (``-1`` after them),
  ``num_emitted = emitted + 1``.

Domain (``Capabilities``): token verification only, draft logits and point-mass drafts, greedy rows
(through one-hot rows), float32 / bfloat16 / float16 logits (cast to float32 as FlashInfer's softmax
does), no chunking, no logprobs, no ``random_draws`` (its Philox state is internal). Randomness keyed by
the batch slot (``randomness_per_request=False``): ``batch_invariance`` judges its greedy requests
only; per-seed invariance of sampled requests is not something FlashInfer promises (issue 50). No positive
temperature is refused by FlashInfer: the whole range is claimed.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import types
from functools import cache

import torch

from harness.adapters.outside import chain_verifier, distribution_version, require_cuda_release
from harness.contract import VerifyBatch, VerifyOutput

SUPPORTED_VERSIONS = ("0.7.4",)
DISTRIBUTION = "flashinfer-python"
INSTALL_HINT = (
    "pip install flashinfer-python==0.7.4 apache-tvm-ffi nvidia-ml-py on a CUDA machine with nvcc "
    "(the sampling module is compiled at the first call); without a package index see "
    "docs/engines.md (bench/scorecard_gpu.sh)"
)
_CHAIN_ARGS = (
    "draft_probs", "draft_token_ids", "target_probs", "maybe_output_accepted_token_num",
    "maybe_output_emitted_draft_token_num", "deterministic", "generator", "seed", "offset",
)  # fmt: skip
IMPORT_NOTES: list[str] = []


class FlashInferUnavailable(RuntimeError):
    """FlashInfer is not installed, not a version this adapter knows, or there is no CUDA device."""


def installed_version() -> str | None:
    """The installed ``flashinfer-python`` distribution's version, or ``None``."""
    return distribution_version(DISTRIBUTION)


def _import_sampling_module():
    """``flashinfer.sampling``; where the package ``__init__`` cannot be imported (it imports every
    FlashInfer module and their dependencies), an empty package object stands in for it so that only
    ``flashinfer/sampling.py`` and what it imports are loaded (recorded in ``IMPORT_NOTES``)."""
    try:
        return importlib.import_module("flashinfer.sampling")
    except ImportError as exc:
        spec = importlib.util.find_spec("flashinfer")
        if spec is None or not spec.submodule_search_locations:
            raise
        for name in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
            del sys.modules[name]
        package = types.ModuleType("flashinfer")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__, package.__file__ = spec, spec.origin
        sys.modules["flashinfer"] = package
        IMPORT_NOTES.append(
            f"flashinfer/__init__.py not importable ({exc}); flashinfer.sampling loaded alone"
        )
        return importlib.import_module("flashinfer.sampling")


@cache
def _api() -> types.SimpleNamespace:
    """FlashInfer's functions this module calls, after the version and signature guard."""
    found = require_cuda_release(installed_version(), DISTRIBUTION, SUPPORTED_VERSIONS,
                                 "harness.adapters.flashinfer", INSTALL_HINT, FlashInferUnavailable,
                                 "FlashInfer's kernels need a CUDA device")
    try:
        sampling = _import_sampling_module()
    except ImportError as exc:
        raise FlashInferUnavailable(
            f"flashinfer.sampling cannot be imported ({exc}); {INSTALL_HINT}"
        ) from exc
    params = tuple(inspect.signature(sampling.chain_speculative_sampling).parameters)
    if params != _CHAIN_ARGS or "temperature" not in inspect.signature(sampling.softmax).parameters:
        raise FlashInferUnavailable(
            f"flashinfer {found}: chain_speculative_sampling's signature changed: {params}"
        )
    return types.SimpleNamespace(chain=sampling.chain_speculative_sampling, softmax=sampling.softmax)


def flashinfer_available() -> str:
    """Empty when the kernel can run here; otherwise why not (for skips and the CLI)."""
    try:
        _api()
    except FlashInferUnavailable as exc:
        return str(exc)
    return ""


def _one_hot(ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """float32 one-hot rows at ``ids``; an id outside ``[0, vocab)`` (``-1`` padding) gets a zero row."""
    rows = torch.zeros((ids.numel(), vocab), dtype=torch.float32, device=ids.device)
    ok = (ids >= 0) & (ids < vocab)
    rows[ok.nonzero().flatten(), ids[ok]] = 1.0
    return rows


def chain_arguments(batch: VerifyBatch, reqs: list[int], k: int) -> tuple[tuple, dict]:
    """``chain_speculative_sampling(*args, **kwargs)`` for requests ``reqs`` (all with ``k`` drafts),
    the mapping of the module docstring (needs ``_api()`` for FlashInfer's softmax)."""
    api = _api()
    dev, vocab = batch.device, batch.vocab_size
    cu = batch.cu_num_draft_tokens.tolist()
    index = torch.as_tensor(reqs, dtype=torch.int64, device=dev)
    temps = batch.temperature.to(device=dev, dtype=torch.float32)[index]
    greedy = temps == 0.0
    target_rows = torch.as_tensor(
        [cu[r] + r + j for r in reqs for j in range(k + 1)], dtype=torch.int64, device=dev
    )
    draft_rows = torch.as_tensor([cu[r] + j for r in reqs for j in range(k)], dtype=torch.int64, device=dev)
    ids = batch.draft_token_ids.to(dev)[draft_rows]
    row_temps = torch.where(greedy, torch.ones_like(temps), temps)
    logits = batch.target_logits[target_rows].float().contiguous()
    target = api.softmax(logits, temperature=row_temps.repeat_interleave(k + 1).contiguous())
    greedy_rows = greedy.repeat_interleave(k + 1)
    if bool(greedy_rows.any()):
        target[greedy_rows] = _one_hot(logits[greedy_rows].argmax(dim=-1), vocab)
    draft = _one_hot(ids, vocab)
    if batch.draft_logits is not None and k > 0:
        sampled = ~greedy.repeat_interleave(k)
        if bool(sampled.any()):
            rows = batch.draft_logits[draft_rows[sampled]].float().contiguous()
            temps = row_temps.repeat_interleave(k)[sampled].contiguous()
            draft[sampled] = api.softmax(rows, temperature=temps)
    n = len(reqs)
    args = (draft.reshape(n, k, vocab), ids.to(torch.int32).reshape(n, k), target.reshape(n, k + 1, vocab))
    kwargs = {
        "deterministic": True,
        "seed": batch.seeds.to(device=dev, dtype=torch.int64)[index].contiguous(),
        "offset": batch.positions.to(device=dev, dtype=torch.int64)[index].contiguous(),
    }
    return args, kwargs


def length_groups(batch: VerifyBatch) -> dict[int, list[int]]:
    """Requests by draft length, each list in batch order (one FlashInfer call per length)."""
    groups: dict[int, list[int]] = {}
    for r, k in enumerate(batch.draft_lengths()):
        groups.setdefault(k, []).append(r)
    return groups


class FlashInferChain:
    """FlashInfer 0.7.4's ``chain_speculative_sampling`` (module docstring: mapping and domain)."""

    name = "flashinfer-0.7.4-chain"
    methods = frozenset({"token"})
    capabilities = chain_verifier(draft_logits=True, randomness_per_request=False)  # subsequence = slot

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        api = _api()
        width = batch.max_draft_len + 1
        ids = torch.full((batch.num_reqs, width), -1, dtype=torch.int64, device=batch.device)
        num = torch.zeros(batch.num_reqs, dtype=torch.int32, device=batch.device)
        for k, reqs in length_groups(batch).items():
            args, kwargs = chain_arguments(batch, reqs, k)
            out, _accepted, emitted = api.chain(*args, **kwargs)
            index = torch.as_tensor(reqs, dtype=torch.int64, device=batch.device)
            ids[index, : k + 1] = out.to(torch.int64)
            num[index] = emitted.to(torch.int32) + 1
        return VerifyOutput(output_token_ids=ids, num_emitted=num)


chain = FlashInferChain()
