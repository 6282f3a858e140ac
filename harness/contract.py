"""The contract between the harness and every kernel under test (DESIGN.md, "The contract").

A kernel under test is any object with ``name``, ``methods``, ``verify(batch) -> VerifyOutput`` and,
optionally, ``capabilities`` (what it claims beyond the minimum) and ``random_draws(batch)`` (the exact
uniforms it will use, which switches on exact coupled checks). Properties a kernel does not claim are
reported as "not claimed", never as passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

import torch

METHODS = ("token", "block")
LOGIT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# The tensor fields of ``VerifyBatch``, in declaration order.
BATCH_TENSOR_FIELDS = (
    "target_logits",
    "draft_logits",
    "draft_token_ids",
    "cu_num_draft_tokens",
    "temperature",
    "seeds",
    "positions",
)


@dataclass
class VerifyBatch:
    """One batch of requests to verify. All tensors live on one device.

    Request ``r`` owns ``k_r = cu[r+1] - cu[r]`` drafts and ``k_r + 1`` consecutive target rows
    starting at row ``cu[r] + r``.
    """

    target_logits: torch.Tensor  # [num_logits, V] float32|bfloat16|float16, raw (no temperature)
    draft_logits: torch.Tensor | None  # [num_draft_total, V] same dtype, or None: point-mass drafts
    draft_token_ids: torch.Tensor  # [num_draft_total] int64
    cu_num_draft_tokens: torch.Tensor  # [num_reqs + 1] int32, starts at 0, non-decreasing
    temperature: torch.Tensor  # [num_reqs] float32, 0.0 = greedy
    seeds: torch.Tensor  # [num_reqs] int64
    positions: torch.Tensor  # [num_reqs] int64, absolute position of each request's first target row
    method: str = "token"  # "token" | "block"
    max_chunk_bytes: int | None = None
    want_logprobs: bool = False

    @property
    def num_reqs(self) -> int:
        return int(self.cu_num_draft_tokens.numel()) - 1

    @property
    def vocab_size(self) -> int:
        return int(self.target_logits.shape[-1])

    @property
    def num_logits(self) -> int:
        return int(self.target_logits.shape[0])

    @property
    def num_draft_total(self) -> int:
        return int(self.draft_token_ids.numel())

    @property
    def device(self) -> torch.device:
        return self.target_logits.device

    def draft_lengths(self) -> list[int]:
        cu = self.cu_num_draft_tokens.tolist()
        return [cu[i + 1] - cu[i] for i in range(len(cu) - 1)]

    @property
    def max_draft_len(self) -> int:
        lengths = self.draft_lengths()
        return max(lengths) if lengths else 0

    def to(self, device: torch.device | str) -> VerifyBatch:
        """A copy with every tensor moved to ``device``."""
        return self._map_tensors(lambda t: t.to(device))

    def clone(self) -> VerifyBatch:
        """A deep copy (tensors cloned), used to prove a kernel leaves its inputs untouched."""
        return self._map_tensors(torch.Tensor.clone)

    def _map_tensors(self, fn) -> VerifyBatch:
        """A copy with ``fn`` applied to every tensor field (``None`` stays ``None``)."""
        values = {name: getattr(self, name) for name in BATCH_TENSOR_FIELDS}
        return replace(self, **{name: None if t is None else fn(t) for name, t in values.items()})


@dataclass
class VerifyOutput:
    """What a kernel returns for a batch.

    ``output_token_ids[r]`` holds the accepted drafts, then the correction or bonus token, then ``-1``
    padding; ``num_emitted[r]`` is in ``[1, k_r + 1]``; ``logprobs`` (when asked for and claimed) is the
    log-probability of each emitted token under the temperature-scaled target row it was emitted from
    (raw log-softmax for greedy rows), padded with ``0.0``.
    """

    output_token_ids: torch.Tensor  # [num_reqs, max_k + 1] int64
    num_emitted: torch.Tensor  # [num_reqs] int32
    logprobs: torch.Tensor | None = None  # [num_reqs, max_k + 1] float32


@dataclass(frozen=True)
class Capabilities:
    """What a kernel claims beyond token/block ``methods``. Unclaimed features are not tested."""

    point_mass_drafts: bool = True  # accepts draft_logits=None
    # Accepts draft logits. False: a target-only verifier (SGLang's tree kernels) that judges point-mass
    # drafts only; no case with draft logits is drawn or replayed, and the properties that need draft
    # distributions (equal models, point mass vs one-hot, the marginal law and E[tau] over sampled
    # drafts) are not claimed.
    draft_logits: bool = True
    greedy: bool = True  # temperature == 0 rows
    logprobs: bool = False
    chunking: bool = False  # honours max_chunk_bytes, results independent of it
    dtypes: frozenset = field(default_factory=lambda: frozenset({torch.float32}))
    max_vocab: int = 262_144
    max_draft_len: int = 16
    raises_on_bad_input: bool = False  # validates arguments and raises ValueError before launching
    devices: frozenset = field(default_factory=lambda: frozenset({"cpu", "cuda"}))
    # ``verify_into(batch, out)`` writes into caller-allocated ``VerifyOutput`` tensors (which may be
    # views into larger, guard-banded buffers). Switches on the poisoned-buffer / guard-band checks.
    output_buffers: bool = False
    # Draft id -1 is documented padding: a token of target probability 0, never accepted (instead of a
    # malformed batch that must be refused).
    draft_padding_minus_one: bool = False
    # The kernel draws its uniforms exactly as docs/interfaces.md section 1 (Philox counters, float32
    # mapping), so ``random_draws`` must equal ``reference.rng`` bit for bit. Kernels with their own
    # generator leave this False and are coupled through whatever ``random_draws`` returns.
    philox_layout: bool = False
    # The kernel's domain: the smallest positive temperature it serves (0.0 stays greedy, see
    # ``greedy``). Strategies draw no positive temperature below it, fixed cases below it are not run,
    # and the report states it. vLLM: 0.01 (its SamplingParams raise anything lower).
    min_temperature: float = 0.0
    # A request's random draws depend only on its own seed and position (docs/interfaces.md section
    # 1), never on its batch slot or batch mates. False: a kernel that keys its generator by the batch
    # slot (FlashInfer's ``curand_init(seed[b], subsequence=b, offset[b])``, documented as not
    # batch-invariant): ``batch_invariance`` then judges its greedy requests only (deterministic
    # whatever the slot); in distribution, the statistical layer's replicas fill every slot.
    randomness_per_request: bool = True
    # How a greedy row (T == 0) breaks an exact tie between maximal logits. "lowest": the lowest
    # index (ours, vLLM, the reference). "any": any maximal token may be the row's argmax (SGLang, whose
    # greedy rows beside a sampled request go through top-k renormalisation with k = 1 and a coin,
    # docs/findings/sglang-kernel-0.4.6.md): greedy outputs are then judged valid, not equal, where a
    # row ties (a draft that is a maximum may be accepted or rejected; the token emitted in its place is
    # a maximum), and are still exact wherever the maximum is strict.
    greedy_ties: str = "lowest"

    def __post_init__(self):
        if self.greedy_ties not in GREEDY_TIE_RULES:
            raise ValueError(f"greedy_ties must be one of {GREEDY_TIE_RULES}, not {self.greedy_ties!r}")


GREEDY_TIE_RULES = ("lowest", "any")


@runtime_checkable
class KernelUnderTest(Protocol):
    """The plug-in protocol. ``random_draws``, ``capabilities`` and ``prepare`` are optional
    attributes. ``prepare()``, when present, is called once before any property runs (``check``,
    ``replay``, ``fuzz``); an exception there means the kernel cannot run on this machine (a missing
    dependency, a failed import): the command stops with that message and exit status 2 instead of
    reporting every case as the kernel's failure."""

    name: str
    methods: frozenset

    def verify(self, batch: VerifyBatch) -> VerifyOutput: ...


class KernelNotReady(RuntimeError):
    """``prepare_kernel``: the kernel's ``prepare()`` raised (its message says why)."""


def prepare_kernel(kernel: object) -> None:
    """Call the kernel's optional ``prepare()`` (KernelUnderTest); raises ``KernelNotReady``."""
    prepare = getattr(kernel, "prepare", None)
    if not callable(prepare):
        return
    try:
        prepare()
    except Exception as exc:  # noqa: BLE001 -- any failure there is a setup problem, stated as such
        raise KernelNotReady(f"{getattr(kernel, 'name', kernel)!r} cannot run here: "
                             f"{type(exc).__name__}: {exc}") from exc


def capabilities_of(kernel: object) -> Capabilities:
    """The kernel's declared capabilities, or the conservative defaults."""
    caps = getattr(kernel, "capabilities", None)
    return caps if isinstance(caps, Capabilities) else Capabilities()


def domain_of(kernel: object) -> dict:
    """The input domain a run draws from for ``kernel`` (stated in the console and the report)."""
    caps = capabilities_of(kernel)
    return {
        "methods": sorted(getattr(kernel, "methods", ())),
        "dtypes": sorted(str(d).replace("torch.", "") for d in caps.dtypes),
        "greedy": caps.greedy,
        **({"greedy_ties": caps.greedy_ties} if caps.greedy_ties != "lowest" else {}),
        "min_temperature": caps.min_temperature,
        "point_mass_drafts": caps.point_mass_drafts,
        "draft_logits": caps.draft_logits,
        "max_vocab": caps.max_vocab,
        "max_draft_len": caps.max_draft_len,
    }


def has_random_draws(kernel: object) -> bool:
    """True when the kernel exposes the exact uniforms it uses (enables coupled exactness checks).

    ``random_draws(batch)`` returns ``(accept_uniforms [num_draft_total], sampling_uniforms
    [num_logits, V])`` as float32 tensors following docs/interfaces.md section 1.
    """
    return callable(getattr(kernel, "random_draws", None))
