"""vLLM's own verification code as kernels under test, imported from an installed ``vllm``.

Nothing of vLLM is copied here: every kernel, the temperature kernel and the request-chunk iteration
are vLLM's functions, called the way vLLM's serving code calls them. Supported versions:
``SUPPORTED_VERSIONS``; any other installed version raises ``VllmUnavailable`` naming them (the
signatures below are checked too, so a patched checkout that changed them is refused as clearly).

Kernels (name them as ``harness.adapters.vllm:<attr>``):

- ``mrv2`` -- Model Runner V2's ``rejection_sample`` (``vllm/v1/worker/gpu/spec_decode/
  rejection_sampler_utils.py``): token and block verification, point-mass drafts and draft logits,
  greedy rows, float32 / bfloat16 / float16 logits, ``-1`` placeholder drafts.
- ``v1`` -- the V1 engine's ``RejectionSampler`` (``vllm/v1/sample/rejection_sampler.py``): token
  verification only, bonus tokens from vLLM's own ``Sampler``.

The MRV2 mapping from ``VerifyBatch`` (what ``RejectionSampler`` in
``vllm/v1/worker/gpu/spec_decode/rejection_sampler.py`` builds from an engine batch):

- State slots: request ``r`` lives in slot ``M - 1 - r`` of ``M = R + 1`` slots, so a kernel that
  indexes per-slot tensors by batch index reads the wrong slot (slot 0 is never used).
  ``idx_mapping[r]`` is that slot; ``temperature[slot]`` and ``seed[slot]`` hold the request's values.
- Rows: request ``r`` owns rows ``cu_num_logits[r] .. cu_num_logits[r+1]-1`` (``k_r + 1`` rows);
  ``expanded_idx_mapping`` gives each row its slot, ``expanded_local_pos`` its index ``0..k_r`` and
  ``pos`` its absolute position ``positions[r] + j``.
- ``draft_sampled`` (int32, as in serving) holds the input id of each row: row ``cu_num_logits[r]``
  the last committed token (id 0 here), draft ``i`` at ``cu_num_logits[r] + 1 + i``.
- Target logits follow ``Sampler.apply_sampling_params``: when no request has a temperature other
  than 0 and 1, the raw logits are passed in their own dtype; otherwise a float32 copy, divided in
  place by vLLM's ``apply_temperature`` (greedy and ``T == 1`` rows untouched).
- Draft logits stay raw in a ``[M, K, V]`` tensor indexed by slot and draft step (``K`` = the
  batch's longest draft); unused steps are zero. ``None`` means point-mass drafts.
- Chunking: ``max_chunk_bytes`` (``None`` = vLLM's 1 GiB) becomes ``max(1, bytes // (4 V))`` rows,
  vLLM's own budget rule, and the requests are split by vLLM's ``_iter_request_chunks``; per-row
  metadata and target rows are sliced per chunk, draft logits stay global, as in vLLM.
- Output: ``sampled[r, i]`` for ``i >= num_sampled[r]`` is uninitialised in vLLM and becomes ``-1``.

``MRV2Arguments`` builds these arguments once per batch: ``mrv2.verify`` calls vLLM on them chunk by
chunk, ``bench/vs_vllm.py`` times vLLM's call alone on them.

Domain (``Capabilities.min_temperature``): vLLM's ``SamplingParams`` raises a temperature in
(0, 0.01) to 0.01 and treats one below 1e-5 as greedy, so no positive temperature below 0.01 reaches
these kernels; the harness draws none.

On a machine without CUDA the kernels run under Triton's interpreter. vLLM disables Triton at import
when it finds no active GPU driver, unless ``CUDA_VISIBLE_DEVICES`` is set and empty (its rule for
distributed workers); ``_import_vllm`` sets it so for the duration of the import only. The
interpreter has no ``libdevice``: the one call vLLM's kernels make (``log1p`` in ``_resample_kernel``)
is served by NumPy's ``log1p`` there (``_InterpreterLibdevice``); compiled kernels are untouched.

vLLM 0.33.0 pins torch 2.14. On an older torch (the H200 image has 2.11), importing vLLM's package
``__init__``s fails in ``vllm/utils/torch_utils.py``, which registers ``LayerName`` as a torch
opaque type for ``torch.compile`` (nothing the verification kernels use). ``_tolerate_opaque_types``
lets that one registration fail during the import and records it in ``IMPORT_NOTES``. Likewise
``vllm/platforms/cuda.py`` imports the compiled extension ``vllm._C_stable_libtorch`` (92 MB, built
for torch 2.14) to register custom ops; where it cannot be imported, an empty module stands in for
it (``_stand_in_extensions``, also recorded): the verification kernels are Triton code and call none
of those ops. Both apply only where the real import fails; the kernels themselves run unchanged.
On CUDA, V1's ``Sampler`` (which draws the bonus tokens) uses FlashInfer's sampler when it can; where
FlashInfer is not installed, ``VLLM_USE_FLASHINFER_SAMPLER=0`` (unless set) selects vLLM's PyTorch
sampler instead of failing on the import (also recorded). The verification kernels are unaffected.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import itertools
import os
from functools import cache

import numpy as np
import torch

import kernels._device  # noqa: F401  (selects TRITON_INTERPRET before triton is imported)
from harness.contract import LOGIT_DTYPES, Capabilities, VerifyBatch, VerifyOutput

SUPPORTED_VERSIONS = ("0.33.0", "0.34.0")  # read and run; a newer one runs if its signatures match
INSTALL_HINT = (
    "pip install --no-deps vllm==0.34.0 -r .ci/vllm-requirements.txt "
    "(vLLM's Python code and the pure-Python packages its import chain needs; see docs/vllm.md)"
)
VLLM_MIN_TEMPERATURE = 0.01  # vllm/sampling_params.py: _MAX_TEMP
# rejection_sample's second argument: a [M, K, V] tensor in 0.33, a DraftLogitsCache from 0.34 on.
_DRAFT_ARG = "draft_logits|draft_logits_cache"
_MRV2_ARGS = (
    "target_logits", _DRAFT_ARG, "draft_sampled", "cu_num_logits", "pos", "idx_mapping",
    "expanded_idx_mapping", "expanded_local_pos", "temperature", "seed", "num_speculative_steps",
)  # fmt: skip


class VllmUnavailable(RuntimeError):
    """vLLM is not installed, or not a version (or signature) this adapter knows."""


@contextlib.contextmanager
def _triton_visible_to_vllm():
    """Without CUDA, make vLLM keep Triton (the interpreter) while it is imported."""
    if torch.cuda.is_available():
        yield
        return
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved


class _InterpreterLibdevice:
    """``libdevice`` functions for Triton's interpreter, where the real module returns ``None``."""

    @staticmethod
    def log1p(x):
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        with np.errstate(invalid="ignore", divide="ignore"):  # masked lanes may hold ratios > 1
            data = np.log1p(x.handle.data).astype(x.handle.data.dtype)
        return tl.tensor(TensorHandle(data, x.handle.dtype), x.type)


IMPORT_NOTES: list[str] = []  # what the import had to tolerate (stated by the CLI and the report)


@contextlib.contextmanager
def _tolerate_opaque_types():
    """While vLLM is imported on a torch older than its pin, a failing opaque-type registration of a
    vLLM class is recorded instead of aborting the import (see the module docstring)."""
    try:
        from torch._library import opaque_object
    except ImportError:
        yield
        return
    original = getattr(opaque_object, "register_opaque_type", None)
    if original is None:
        yield
        return

    def tolerant(cls, *args, **kwargs):
        try:
            return original(cls, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 -- only vLLM's own classes are tolerated
            if not getattr(cls, "__module__", "").startswith("vllm."):
                raise
            IMPORT_NOTES.append(
                f"torch {torch.__version__}: register_opaque_type({cls.__name__}) failed ({exc}); tolerated"
            )

    opaque_object.register_opaque_type = tolerant
    try:
        yield
    finally:
        opaque_object.register_opaque_type = original


_COMPILED_EXTENSIONS = ("vllm._C_stable_libtorch",)


def _stand_in_extensions() -> None:
    """An empty module for each compiled vLLM extension that cannot be imported (module docstring)."""
    import sys
    import types

    for name in _COMPILED_EXTENSIONS:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            sys.modules[name] = types.ModuleType(name)
            IMPORT_NOTES.append(f"{name} not importable ({exc}); an empty module stands in for it")


def installed_version() -> str | None:
    """The installed vLLM distribution's version, or ``None``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, ...]:
    """``"0.34.0rc1"`` -> ``(0, 34, 0)``: the leading numeric release, for ordering versions."""
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _version_verdict(found: str | None) -> str:
    """``""`` for a known version, a warning for a newer one (then its signatures decide); raises
    ``VllmUnavailable`` when vLLM is missing or older than the versions this adapter knows."""
    if found is None:
        raise VllmUnavailable(f"vLLM is not installed; install it with: {INSTALL_HINT}")
    if found in SUPPORTED_VERSIONS:
        return ""
    if _release(found) > max(_release(v) for v in SUPPORTED_VERSIONS):
        return (
            f"vLLM {found} is newer than the versions this adapter was checked against "
            f"({', '.join(SUPPORTED_VERSIONS)}); its signatures match, so it runs with their mapping"
        )
    raise VllmUnavailable(
        f"vLLM {found} is installed; harness.adapters.vllm knows vLLM {', '.join(SUPPORTED_VERSIONS)} "
        "(its argument mapping is written for those versions' signatures)"
    )


def _signature_problem(params: list[str]) -> str:
    """Why ``rejection_sample``'s parameters do not fit the MRV2 mapping, or ``""``."""
    for i, want in enumerate(_MRV2_ARGS):
        if i >= len(params) or params[i] not in want.split("|"):
            return f"parameter {i} is {params[i] if i < len(params) else 'missing'!r}, expected {want!r}"
    if "use_block_verification" not in params:
        return "no keyword use_block_verification"
    return ""


def _optional_module(name: str):
    """``importlib.import_module(name)``, or ``None`` when that module is gone from this vLLM."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not name.startswith(exc.name):
            raise  # a dependency is missing, not the module itself: say so
        return None


def _module_attr(module: str, attr: str):
    return getattr(importlib.import_module(module), attr)


@cache
def _import_vllm() -> dict:
    """vLLM's functions this module calls, after the version and signature guard.

    Version differences are read from what the installed vLLM offers, not from its version number:
    ``draft_logits_cache`` (0.34: a ``DraftLogitsCache``) or ``draft_logits`` (0.33: a tensor),
    ``skip_masked_vocab_blocks`` where ``rejection_sample`` has it, the V1 engine's modules where they
    still exist (0.34 removed them).
    """
    found = installed_version()
    newer = _version_verdict(found)
    try:
        return _import_vllm_modules(found, newer)
    except ImportError as exc:  # a dependency of vLLM's import chain is missing or of the wrong version
        raise VllmUnavailable(f"vLLM {found} cannot be imported here: {type(exc).__name__}: {exc}") from exc


def _import_vllm_modules(found: str, newer: str | None) -> dict:
    with _triton_visible_to_vllm(), _tolerate_opaque_types():
        if torch.cuda.is_available():
            _stand_in_extensions()
            if (
                importlib.util.find_spec("flashinfer") is None
                and "VLLM_USE_FLASHINFER_SAMPLER" not in os.environ
            ):
                os.environ["VLLM_USE_FLASHINFER_SAMPLER"] = "0"
                IMPORT_NOTES.append(
                    "flashinfer not installed: VLLM_USE_FLASHINFER_SAMPLER=0 (V1 bonus sampler)"
                )
        utils = importlib.import_module("vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils")
        wrapper = importlib.import_module("vllm.v1.worker.gpu.spec_decode.rejection_sampler")
        gumbel = importlib.import_module("vllm.v1.worker.gpu.sample.gumbel")
        draft_cache = _optional_module("vllm.v1.worker.gpu.spec_decode.draft_logits")
        v1_sampler = _optional_module("vllm.v1.sample.rejection_sampler")
        v1_modules = None
        if v1_sampler is not None:
            v1_modules = {
                "V1RejectionSampler": v1_sampler.RejectionSampler,
                "V1Sampler": _module_attr("vllm.v1.sample.sampler", "Sampler"),
                "SamplingMetadata": _module_attr("vllm.v1.sample.metadata", "SamplingMetadata"),
                "SpecDecodeMetadata": _module_attr("vllm.v1.spec_decode.metadata", "SpecDecodeMetadata"),
                "LogitsProcessors": _module_attr("vllm.v1.sample.logits_processor", "LogitsProcessors"),
                "placeholder": int(v1_sampler.PLACEHOLDER_TOKEN_ID),
            }
        triton_utils = importlib.import_module("vllm.triton_utils")
    if newer:
        IMPORT_NOTES.append(newer)
    if IMPORT_NOTES:
        import warnings

        warnings.warn("harness.adapters.vllm: " + "; ".join(IMPORT_NOTES), stacklevel=2)
    if not triton_utils.HAS_TRITON:
        raise VllmUnavailable("vLLM imported with Triton disabled (no usable Triton backend)")
    if os.environ.get("TRITON_INTERPRET") == "1":
        utils.tldevice = _InterpreterLibdevice()
    params = list(inspect.signature(utils.rejection_sample).parameters)
    problem = _signature_problem(params)
    takes_cache = params[1] == "draft_logits_cache"
    if not problem and takes_cache and draft_cache is None:
        problem = "it takes draft_logits_cache but vllm...spec_decode.draft_logits is missing"
    if problem:
        raise VllmUnavailable(
            f"vLLM {found}: rejection_sample's signature does not fit the MRV2 mapping: {problem}"
        )
    return {
        "version": found,
        "rejection_sample": utils.rejection_sample,
        "draft_logits_cache": draft_cache.DraftLogitsCache if takes_cache else None,
        "skip_masked_vocab_blocks": "skip_masked_vocab_blocks" in params,
        "iter_request_chunks": wrapper._iter_request_chunks,
        "max_chunk_logits": wrapper.get_max_chunk_logits,
        "fp32_bytes": wrapper._FP32_BYTES,
        "apply_temperature": gumbel.apply_temperature,
        "v1": v1_modules,
    }


def vllm_available() -> str:
    """Empty when the adapters can run here; otherwise why not (for skips and the CLI)."""
    try:
        _import_vllm()
    except VllmUnavailable as exc:
        return str(exc)
    return ""


def _capabilities(methods_dtypes: frozenset, chunking: bool) -> Capabilities:
    return Capabilities(
        point_mass_drafts=True,
        greedy=True,
        logprobs=False,
        chunking=chunking,
        dtypes=methods_dtypes,
        max_vocab=262_144,
        max_draft_len=16,
        raises_on_bad_input=False,
        draft_padding_minus_one=True,
        min_temperature=VLLM_MIN_TEMPERATURE,
    )


def _pad_after_emitted(ids: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
    """``-1`` past each request's ``num`` entries (vLLM leaves them uninitialised)."""
    cols = torch.arange(ids.shape[1], device=ids.device)
    return torch.where(cols[None, :] < num[:, None].to(torch.int64), ids.to(torch.int64), -1)


def mrv2_rejection_sample():
    """vLLM's MRV2 ``rejection_sample`` itself, after the version and signature guard (raises
    ``VllmUnavailable``): for callers that time it alone on ``MRV2Arguments``."""
    return _import_vllm()["rejection_sample"]


class MRV2Arguments:
    """``rejection_sample``'s arguments for one ``VerifyBatch``: the MRV2 mapping of the module
    docstring, built once per batch on its device.

    ``chunks()`` are vLLM's request chunks for the batch's ``max_chunk_bytes``; ``for_requests(start,
    end)`` returns ``(args, kwargs)`` for requests ``start..end-1``, including what vLLM's ``Sampler``
    does to the target rows before the verifier sees them (the float32 copy and ``apply_temperature``
    when a temperature is not 0 or 1). Raises ``VllmUnavailable`` when vLLM cannot be used.
    """

    def __init__(self, batch: VerifyBatch):
        self.api = _import_vllm()
        self.batch = batch
        dev = batch.device
        lengths = batch.draft_lengths()
        num_reqs, vocab = batch.num_reqs, batch.vocab_size
        self.steps = steps = max(lengths, default=0)
        slots = num_reqs + 1
        self.slot_of_req = slot_of_req = torch.arange(num_reqs - 1, -1, -1, device=dev) + 1
        self.cu_logits_np = np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64) + 1)])
        self.cu_logits = torch.as_tensor(self.cu_logits_np, dtype=torch.int32, device=dev)
        rows_per_req = torch.as_tensor(np.asarray(lengths) + 1, device=dev)
        row_req = torch.repeat_interleave(torch.arange(num_reqs, device=dev), rows_per_req)
        local_pos = torch.arange(batch.num_logits, device=dev) - self.cu_logits.to(torch.int64)[row_req]
        self.local_pos = local_pos
        self.expanded_slot = slot_of_req[row_req].to(torch.int32)
        self.pos = batch.positions.to(torch.int64)[row_req] + local_pos

        self.temperature = torch.zeros(slots, dtype=torch.float32, device=dev)
        self.temperature[slot_of_req] = batch.temperature.to(torch.float32)
        self.seed = torch.zeros(slots, dtype=torch.int64, device=dev)
        self.seed[slot_of_req] = batch.seeds.to(torch.int64)

        self.draft_sampled = torch.zeros(batch.num_logits, dtype=torch.int32, device=dev)
        is_draft_row = local_pos > 0
        self.draft_sampled[is_draft_row] = batch.draft_token_ids.to(torch.int32)
        self.draft_logits = None  # the second argument: a tensor (0.33) or a DraftLogitsCache (0.34)
        if batch.draft_logits is not None:
            shape = (slots, max(steps, 1), vocab)
            cache_class = self.api["draft_logits_cache"]
            if cache_class is None:
                values = self.draft_logits = torch.zeros(shape, dtype=batch.draft_logits.dtype, device=dev)
            else:  # replicated (unsharded) cache: row = state slot, as on one GPU
                self.draft_logits = cache_class(
                    *shape, dtype=batch.draft_logits.dtype, fill=0.0, device=dev, sharded=False
                )
                values = self.draft_logits.values
            draft_row_req = row_req[is_draft_row]
            values[slot_of_req[draft_row_req], local_pos[is_draft_row] - 1] = batch.draft_logits
        self.needs_processing = any(t not in (0.0, 1.0) for t in batch.temperature.tolist())

    def chunks(self) -> list[tuple[int, int]]:
        """``(start, end)`` request ranges as vLLM's serving wrapper splits the batch."""
        budget, vocab = self.batch.max_chunk_bytes, self.batch.vocab_size
        if budget is None:
            max_rows = self.api["max_chunk_logits"](vocab)
        else:
            max_rows = max(1, budget // (vocab * self.api["fp32_bytes"]))
        if self.batch.num_logits <= max_rows:
            return [(0, self.batch.num_reqs)]
        return list(self.api["iter_request_chunks"](self.cu_logits_np, max_rows))

    def for_requests(
        self, start: int, end: int, skip_masked_vocab_blocks: bool = False
    ) -> tuple[tuple, dict]:
        """``rejection_sample(*args, **kwargs)`` for requests ``start..end-1`` (whole batch: 0, R);
        ``skip_masked_vocab_blocks`` is passed only where this vLLM has it."""
        lo, hi = int(self.cu_logits_np[start]), int(self.cu_logits_np[end])
        target = self.batch.target_logits[lo:hi]
        if self.needs_processing:
            target = torch.empty_like(target, dtype=torch.float32).copy_(target)
            self.api["apply_temperature"](target, self.expanded_slot[lo:hi], self.temperature)
        args = (
            target,
            self.draft_logits,
            self.draft_sampled[lo:hi],
            self.cu_logits[start : end + 1] - lo,
            self.pos[lo:hi],
            self.slot_of_req[start:end].to(torch.int32),
            self.expanded_slot[lo:hi],
            self.local_pos[lo:hi].to(torch.int32),
            self.temperature,
            self.seed,
            self.steps,
        )
        kwargs = {"use_block_verification": self.batch.method == "block"}
        if self.api["skip_masked_vocab_blocks"]:
            kwargs["skip_masked_vocab_blocks"] = skip_masked_vocab_blocks
        return args, kwargs


def _versioned_name(kind: str) -> str:
    """``vllm-0.34-mrv2``: the name that regression entries' ``known_defects`` are keyed by."""
    found = installed_version()
    release = ".".join(map(str, _release(found)[:2])) if found else "unknown"
    return f"vllm-{release}-{kind}"


class VllmMRV2:
    """Model Runner V2's ``rejection_sample``, token and block verification (module docstring).

    ``skip_masked_vocab_blocks`` (vLLM >= 0.34): the resample kernel's early exit for vocabulary
    blocks whose target logits are all ``-inf``; vLLM's serving wrapper turns it on whenever top-k,
    top-p or min-p may mask a row. ``mrv2`` runs with it off (the plain serving path), ``mrv2_skip_masked``
    with it on; on a vLLM without the keyword, ``mrv2_skip_masked`` is unavailable.

    ``random_draws`` reproduces vLLM's own uniforms (harness/adapters/vllm_draws.py), which turns on
    decision-by-decision coupling with the oracle.
    """

    methods = frozenset({"token", "block"})
    capabilities = _capabilities(frozenset(LOGIT_DTYPES), chunking=True)

    def __init__(self, skip_masked_vocab_blocks: bool = False):
        self.skip_masked_vocab_blocks = skip_masked_vocab_blocks

    def prepare(self) -> None:
        """Import vLLM before any property runs (contract ``prepare``): a broken install (H100,
        2026-12-07: a huggingface-hub that vLLM's transformers refuses) then stops ``check`` with the
        reason instead of failing every case with the same ImportError."""
        api = _import_vllm()
        if self.skip_masked_vocab_blocks and not api["skip_masked_vocab_blocks"]:
            raise VllmUnavailable(f"vLLM {api['version']}'s rejection_sample has no skip_masked_vocab_blocks")

    @property
    def name(self) -> str:
        return _versioned_name("mrv2-skip-masked" if self.skip_masked_vocab_blocks else "mrv2")

    def _arguments(self, batch: VerifyBatch) -> MRV2Arguments:
        call = MRV2Arguments(batch)
        if self.skip_masked_vocab_blocks and not call.api["skip_masked_vocab_blocks"]:
            raise VllmUnavailable(
                f"vLLM {call.api['version']}'s rejection_sample has no skip_masked_vocab_blocks "
                "(added in 0.34)"
            )
        return call

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        call = self._arguments(batch)
        sampled_parts, num_parts = [], []
        for start, end in call.chunks():
            args, kwargs = call.for_requests(start, end, self.skip_masked_vocab_blocks)
            sampled, num_sampled = call.api["rejection_sample"](*args, **kwargs)
            sampled_parts.append(sampled)
            num_parts.append(num_sampled)
        num = torch.cat(num_parts).to(torch.int32)
        ids = _pad_after_emitted(torch.cat(sampled_parts), num)
        return VerifyOutput(output_token_ids=ids[:, : call.steps + 1].contiguous(), num_emitted=num)

    def random_draws(self, batch: VerifyBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """vLLM's acceptance and resampling uniforms for ``batch`` (the contract's two arrays)."""
        call = self._arguments(batch)  # imports vLLM first, the way it must be imported here
        from harness.adapters.vllm_draws import vllm_uniforms

        return vllm_uniforms(call)


class VllmV1:
    """The V1 engine's ``RejectionSampler.forward`` (token verification), without an engine.

    Mapping: the logits are ``batch.target_logits`` as they are (vLLM's forward casts them to float32
    and applies the temperature itself); ``SpecDecodeMetadata`` points the target rows at each
    request's first ``k_r`` rows and the bonus rows at its last; draft logits become ``draft_probs =
    softmax(draft_logits / T)`` in float32 (the probabilities V1 proposers hand over; greedy rows use
    ``T = 1``, which V1 ignores for them), ``None`` stays point-mass drafts. Each request gets its own
    ``torch.Generator`` seeded with its seed (V1 draws with torch's generators, keyed by request, not by
    position). ``num_emitted`` counts the non-placeholder entries of vLLM's ``[R, max_k + 1]`` output.
    V1 has no chunking; its uniforms are not exposed, so no coupling.
    """

    methods = frozenset({"token"})
    capabilities = _capabilities(frozenset(LOGIT_DTYPES), chunking=False)

    @property
    def name(self) -> str:
        return _versioned_name("v1")

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        api = _import_vllm()["v1"]
        if api is None:
            raise VllmUnavailable(
                f"vLLM {installed_version()} removed the V1 engine (vllm/v1/sample/rejection_sampler.py "
                "is gone since 0.34); check its Model Runner V2 verifier: harness.adapters.vllm:mrv2"
            )
        dev = batch.device
        lengths = batch.draft_lengths()
        num_reqs = batch.num_reqs
        steps = max(lengths, default=0)
        starts = np.concatenate([[0], np.cumsum(np.asarray(lengths) + 1)[:-1]]).astype(np.int64)
        target_rows = [int(s) + j for s, k in zip(starts, lengths, strict=True) for j in range(k)]
        bonus_rows = [int(s) + k for s, k in zip(starts, lengths, strict=True)]
        as_i32 = lambda rows: torch.tensor(rows, dtype=torch.int32, device=dev)
        cu_draft = batch.cu_num_draft_tokens.to(device=dev, dtype=torch.int32)
        metadata = api["SpecDecodeMetadata"](
            draft_token_ids=batch.draft_token_ids.to(torch.int32),
            num_draft_tokens=list(lengths),
            cu_num_draft_tokens=cu_draft[1:].contiguous(),
            cu_num_sampled_tokens=torch.cumsum(as_i32([k + 1 for k in lengths]), 0).to(torch.int32),
            target_logits_indices=as_i32(target_rows),
            bonus_logits_indices=as_i32(bonus_rows),
            logits_indices=torch.arange(batch.num_logits, dtype=torch.int32, device=dev),
        )
        temps = batch.temperature.to(device=dev, dtype=torch.float32)
        greedy = [t == 0.0 for t in temps.tolist()]
        draft_probs = None
        if batch.draft_logits is not None:
            row_temp = torch.repeat_interleave(temps, torch.as_tensor(lengths, device=dev))
            row_temp = torch.where(row_temp == 0.0, torch.ones_like(row_temp), row_temp)
            draft_probs = torch.softmax(batch.draft_logits.to(torch.float32) / row_temp[:, None], dim=-1)
        generators = {
            r: torch.Generator(device=dev).manual_seed(int(s)) for r, s in enumerate(batch.seeds.tolist())
        }
        zeros = torch.zeros(num_reqs, dtype=torch.float32, device=dev)
        sampling = api["SamplingMetadata"](
            temperature=None if all(greedy) else temps,
            all_greedy=all(greedy),
            all_random=not any(greedy),
            top_p=None,
            top_k=None,
            generators=generators,
            max_num_logprobs=None,
            no_penalties=True,
            prompt_token_ids=None,
            frequency_penalties=zeros,
            presence_penalties=zeros,
            repetition_penalties=torch.ones_like(zeros),
            output_token_ids=[[] for _ in range(num_reqs)],
            allowed_token_ids_mask=None,
            bad_words_token_ids={},
            logitsprocs=api["LogitsProcessors"](),
        )
        sampler = api["V1RejectionSampler"](api["V1Sampler"](), None, dev)
        out = sampler(metadata, draft_probs, batch.target_logits.clone(), sampling).sampled_token_ids
        ids = out.to(torch.int64)[:, : steps + 1]
        num = (ids != api["placeholder"]).sum(dim=1).to(torch.int32)
        return VerifyOutput(output_token_ids=ids.contiguous(), num_emitted=num)


mrv2 = VllmMRV2()
mrv2_skip_masked = VllmMRV2(skip_masked_vocab_blocks=True)
v1 = VllmV1()
