"""SGLang's tree verifiers as a kernel under test, loaded from an installed ``sglang-kernel`` wheel
(nothing of SGLang is copied here).

Kernel: ``harness.adapters.sglang:chain`` -- SGLang's EAGLE verification of a chain (a tree with one
child per node), CUDA only: ``tree_speculative_sampling_target_only`` for batches with a sampled
request, ``verify_tree_greedy`` for all-greedy batches, as SGLang's serving code chooses.

Loading: ``sglang-kernel`` 0.4.6 is built for torch 2.11 / CUDA 13 and its package ``__init__`` imports
every SGLang op library. This adapter loads only ``sgl_kernel/sm90/common_ops.*.so`` (``sm100/`` on
other GPUs, the rule of ``sgl_kernel/load_utils.py``) with ``torch.ops.load_library`` and calls the
registered ops ``torch.ops.sgl_kernel.<name>.default`` with the arguments of ``sgl_kernel/speculative.py``
and ``sgl_kernel/sampling.py`` (``_top_k_renorm_probs_internal``). Where the library's CUDA
dependencies (``libnvrtc.so.13``, ``libcublas.so.13``) are not yet loaded, they are loaded from
torch's ``nvidia/`` wheels or ``/usr/local/cuda`` first (recorded in ``IMPORT_NOTES``).

What the kernel does (``sgl-kernel/csrc/speculative/speculative_sampling.cuh`` of SGLang's repository,
read at a stored commit of that file: the wheel carries no sources), kernel
``TreeSpeculativeSamplingTargetOnly``, one CUDA block per request ``b``:

- ``uniform_samples [bs, N]`` float32: the coin deciding the children of node ``i`` is
  ``uniform_samples[b, i]``; ``uniform_samples_for_final_sampling [bs]`` the coin of the final draw;
- node ``j`` is accepted iff ``coin <= prob_acc / threshold_acc`` or ``target_prob(x_j) >=
  threshold_single``, where ``prob_acc`` sums the target probabilities of the siblings tried so far
  (a chain: the draft's own target probability). At thresholds 1.0 this is point-mass token
  verification with an INCLUSIVE compare: a coin of exactly 0 accepts a draft of target probability 0
  (sglang#35771; SGLang's serving code draws its coins with ``torch.rand``, which returns 0);
- on a rejection it writes the target probability into ``draft_probs`` at the rejected token (the
  point-mass residual), and draws the correction from ``relu(target - draft_probs)`` of the last
  accepted node's row by inverse CDF (the bonus: that row alone); when the residual is empty it emits
  ``last_valid_id``, or ``d - 1`` when there is none (an id of target probability 0 where the row is
  one-hot at another token);
- outputs: ``predicts [bs * N + 1]`` int32 (token emitted after each accepted node, indexed by
  ``retrive_index``), ``accept_index [bs, spec_steps + 1]`` int32 (``-1`` padded), ``accept_token_num
  [bs]`` int32. ``verify_tree_greedy`` takes ``target_predict [bs, N]`` (argmax ids) instead.

The mapping from ``VerifyBatch`` (``EagleVerifyInput.verify`` in ``python/sglang/srt/speculative/
eagle_info.py`` of SGLang, with ``topk = 1``): ``N = K + 1`` nodes per request (``K`` the batch's
longest draft); node 0 is the last committed token (id 0 here), node ``j`` draft ``j``;
``retrive_index[b, i] = b * N + i``, ``retrive_next_token[b, i] = i + 1`` for ``i < k_b`` and ``-1``
from node ``k_b`` on (a shorter chain ends there; its unused nodes are never visited),
``retrive_next_sibling = -1``; ids int64. Target rows: ``softmax(logits / T)`` in float32 (greedy rows:
``T = 1``), then ``top_k_renorm_probs`` with ``top_k = 1`` for greedy rows and ``1 << 30`` (SGLang's
``TOP_K_ALL``) for the others -- SGLang's ``SamplingParams`` turns a temperature below 1e-6 into
``T = 1, top_k = 1``. ``draft_probs`` zeros; thresholds 1.0 (the exact setting); ``deterministic=True``.
Coins: ``coins(batch)``, a counter-based hash of (seed, position, node) mapped to the grid of
``torch.rand`` (multiples of 2^-24 in [0, 1), 0 included), so a call is a deterministic function of the
batch and each request's coins do not depend on its batch mates. ``verify_with_coins`` takes the coins
from the caller (the sglang#35771 reproduction passes 0). Emitted tokens: ``predicts[accept_index[b, j]]``
up to the first ``-1``; ``num_emitted = accept_token_num + 1``.

Domain (``Capabilities``): token verification of point-mass drafts only (``draft_logits=False``: the
kernel has no draft distribution), greedy rows, logits of any float dtype (cast to float32 as SGLang's
logits processor hands them over), positive temperatures from 1e-6 (``min_temperature``), no chunking,
no logprobs; a greedy row's exact tie may go to any maximum (``greedy_ties="any"``: in a mixed batch
greedy rows are sampled after ``top_k_renorm_probs(k = 1)``, which keeps every tied maximum).
No ``random_draws``: the contract's sampling uniforms feed a Gumbel race per vocabulary
entry, and SGLang draws its correction by inverse CDF from one coin, so exact coupling of the whole
output is impossible (the acceptance coins alone would couple).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import types
from functools import cache
from pathlib import Path

import torch

from harness.adapters.outside import chain_verifier, distribution_version, require_cuda_release
from harness.contract import VerifyBatch, VerifyOutput

SUPPORTED_VERSIONS = ("0.4.6",)
DISTRIBUTION = "sglang-kernel"
INSTALL_HINT = (
    "pip install sglang-kernel==0.4.6 (a CUDA 13 machine with torch 2.11); without a package index "
    "see docs/engines.md (bench/scorecard_gpu.sh)"
)
SGLANG_MIN_TEMPERATURE = 1e-6  # sglang/srt/sampling/sampling_params.py: _SAMPLING_EPS
TOP_K_ALL = 1 << 30  # sglang/srt/sampling/sampling_params.py
_OPS = {  # op name -> the argument names of its schema (sgl_kernel/speculative.py, sampling.py)
    "tree_speculative_sampling_target_only": (
        "predicts", "accept_index", "accept_token_num", "candidates", "retrive_index",
        "retrive_next_token", "retrive_next_sibling", "uniform_samples",
        "uniform_samples_for_final_sampling", "target_probs", "draft_probs", "threshold_single",
        "threshold_acc", "deterministic",
    ),
    "verify_tree_greedy": (
        "predicts", "accept_index", "accept_token_num", "candidates", "retrive_index",
        "retrive_next_token", "retrive_next_sibling", "target_predict",
    ),
    "top_k_renorm_probs": None,  # called positionally: (probs, renorm_probs, maybe_top_k_arr, top_k_val)
}  # fmt: skip
_CUDA_LIBS = ("libnvrtc.so.13", "libcublasLt.so.13", "libcublas.so.13", "libcudart.so.13")
IMPORT_NOTES: list[str] = []


class SglangUnavailable(RuntimeError):
    """sglang-kernel is not installed, not a version this adapter knows, or cannot be loaded here."""


def installed_version() -> str | None:
    """The installed ``sglang-kernel`` distribution's version, or ``None``."""
    return distribution_version(DISTRIBUTION)


def _library_path() -> Path:
    """``sgl_kernel/<sm90|sm100>/common_ops.*.so`` of the installed package (load_utils.py's rule)."""
    spec = importlib.util.find_spec("sgl_kernel")
    if spec is None or not spec.submodule_search_locations:
        raise SglangUnavailable(f"sgl_kernel is not importable; install it with: {INSTALL_HINT}")
    major, minor = torch.cuda.get_device_capability() if torch.cuda.is_available() else (None, None)
    subdir = "sm90" if (major, minor) == (9, 0) else "sm100"
    root = Path(list(spec.submodule_search_locations)[0])
    found = sorted(p for p in glob.glob(str(root / subdir / "common_ops.*")) if ".so" in p)
    if not found:
        raise SglangUnavailable(f"no {subdir}/common_ops library under {root}; {INSTALL_HINT}")
    return Path(found[0])


def _preload_cuda_libraries() -> list[str]:
    """dlopen (global) the CUDA 13 libraries the op library needs, from torch's nvidia wheels or
    /usr/local/cuda; returns the paths loaded."""
    import site

    roots = [Path(p) / "nvidia" for p in site.getsitepackages() + [site.getusersitepackages()]]
    roots.append(Path(torch.__file__).parent.parent / "nvidia")
    dirs = [d for r in roots for d in glob.glob(str(r / "**" / "lib"), recursive=True)]
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
    loaded = []
    for name in _CUDA_LIBS:
        for d in dirs:
            path = Path(d) / name
            if path.exists():
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                loaded.append(str(path))
                break
    return loaded


@cache
def _ops() -> types.SimpleNamespace:
    """SGLang's registered ops, after the version, library and schema guards."""
    found = require_cuda_release(installed_version(), DISTRIBUTION, SUPPORTED_VERSIONS,
                                 "harness.adapters.sglang", INSTALL_HINT, SglangUnavailable,
                                 "SGLang's kernels need a CUDA device (its op library links libcuda)")
    path = _library_path()
    try:
        torch.ops.load_library(str(path))
    except OSError as exc:
        loaded = _preload_cuda_libraries()
        IMPORT_NOTES.append(f"{path.name}: {exc}; preloaded {loaded}")
        try:
            torch.ops.load_library(str(path))
        except OSError as again:
            raise SglangUnavailable(f"cannot load {path}: {again}") from again
    namespace = torch.ops.sgl_kernel
    ops = {}
    for name, expected in _OPS.items():
        op = getattr(namespace, name).default
        names = tuple(a.name for a in op._schema.arguments)
        if expected is not None and names != expected:
            raise SglangUnavailable(f"sglang-kernel {found}: {name}'s schema changed: {names}")
        ops[name] = op
    return types.SimpleNamespace(**ops)


def sglang_available() -> str:
    """Empty when the kernel can run here; otherwise why not (for skips and the CLI)."""
    try:
        _ops()
    except SglangUnavailable as exc:
        return str(exc)
    return ""


_MASK64 = (1 << 64) - 1


def _signed(c: int) -> int:
    return c - (1 << 64) if c >= 1 << 63 else c


_GOLDEN, _MIX1, _MIX2 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shr(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def _splitmix64(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finaliser on int64 tensors (wrapping arithmetic)."""
    z = x + _GOLDEN
    z = (z ^ _shr(z, 30)) * _MIX1
    z = (z ^ _shr(z, 27)) * _MIX2
    return z ^ _shr(z, 31)


def _grid_uniforms(seeds: torch.Tensor, counters: torch.Tensor, stream: int) -> torch.Tensor:
    """float32 in [0, 1) on torch.rand's grid (multiples of 2^-24, 0 included) from (seed, counter)."""
    z = _splitmix64(_splitmix64(seeds.to(torch.int64)) ^ _splitmix64(counters.to(torch.int64) * 4 + stream))
    return _shr(z, 40).to(torch.float32) * 2.0**-24


class SglangChain:
    """SGLang's EAGLE chain verification (module docstring: mapping, domain, known defects)."""

    name = "sglang-kernel-0.4.6-chain"
    methods = frozenset({"token"})
    # greedy_ties="any": beside a sampled request a greedy row is a top-1 renormalised row sampled with
    # a coin, so exact ties go to any maximum (H100, 2026-12-07: bench/engine_repros.py sglang-greedy-ties
    # emitted 5 or 3 for maxima {0, 3, 5} by coin; alone, argmax gives 0)
    capabilities = chain_verifier(draft_logits=False, min_temperature=SGLANG_MIN_TEMPERATURE,
                                  greedy_ties="any")

    def coins(self, batch: VerifyBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(uniform_samples [R, K + 1], uniform_samples_for_final_sampling [R])`` this adapter passes:
        node ``i`` of request ``r`` gets the value of ``(seeds[r], positions[r] + i)``, the final draw
        that of ``(seeds[r], positions[r])`` on another stream."""
        dev, steps = batch.device, batch.max_draft_len
        seeds = batch.seeds.to(device=dev, dtype=torch.int64)
        pos = batch.positions.to(device=dev, dtype=torch.int64)
        nodes = pos[:, None] + torch.arange(steps + 1, device=dev)[None, :]
        coins = _grid_uniforms(seeds[:, None].expand_as(nodes), nodes, stream=0)
        return coins.contiguous(), _grid_uniforms(seeds, pos, stream=1)

    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        coins, final = self.coins(batch)
        return self.verify_with_coins(batch, coins, final)

    def verify_with_coins(self, batch: VerifyBatch, coins: torch.Tensor, final: torch.Tensor) -> VerifyOutput:
        """``verify`` with the caller's coins (shapes of ``coins``); all-greedy batches use none."""
        ops = _ops()
        if batch.draft_logits is not None and batch.num_draft_total > 0:
            raise ValueError("SGLang's verifier is target-only: draft logits are outside its domain")
        tree = chain_tree(batch)
        temps = batch.temperature.to(device=batch.device, dtype=torch.float32)
        if bool((temps == 0.0).all()):
            target_predict = torch.zeros(tree.rows.shape, dtype=torch.int64, device=batch.device)
            target_predict[tree.used] = batch.target_logits[tree.rows[tree.used]].argmax(dim=-1)
            ops.verify_tree_greedy(*tree.outputs(), *tree.structure(), target_predict)
        else:
            target_probs = self.target_probs(batch, tree, temps, ops)
            draft_probs = torch.zeros_like(target_probs)
            ops.tree_speculative_sampling_target_only(
                *tree.outputs(), *tree.structure(), coins.to(torch.float32).contiguous(),
                final.to(torch.float32).contiguous(), target_probs, draft_probs, 1.0, 1.0, True,
            )  # fmt: skip
        return tree.emitted()

    @staticmethod
    def target_probs(batch: VerifyBatch, tree: ChainTree, temps: torch.Tensor, ops) -> torch.Tensor:
        """``[R, N, V]`` float32: SGLang's softmax of ``logits / T`` and ``top_k_renorm_probs`` for the
        used nodes, zeros for the unused ones."""
        greedy = temps == 0.0
        row_temp = torch.where(greedy, torch.ones_like(temps), temps)[tree.req_of_row]
        logits = batch.target_logits[tree.rows[tree.used]].float()
        probs = torch.softmax(logits / row_temp[:, None], dim=-1)
        top_k = torch.where(greedy, 1, TOP_K_ALL).to(torch.int32)[tree.req_of_row].contiguous()
        renormed = torch.empty_like(probs)
        ops.top_k_renorm_probs(probs.contiguous(), renormed, top_k, 0)
        out = torch.zeros((*tree.rows.shape, batch.vocab_size), dtype=torch.float32, device=batch.device)
        out[tree.used] = renormed
        return out


class ChainTree:
    """The tree tensors of one batch (``chain_tree``) and the output buffers SGLang allocates."""

    def __init__(self, batch: VerifyBatch):
        dev = batch.device
        lengths = batch.draft_lengths()
        reqs, nodes = batch.num_reqs, batch.max_draft_len + 1
        self.nodes = nodes
        cu = batch.cu_num_draft_tokens.tolist()
        node = torch.arange(nodes, device=dev)
        k = torch.as_tensor(lengths, dtype=torch.int64, device=dev).reshape(reqs, 1)
        self.used = node[None, :] <= k  # [R, N] nodes of each chain (node 0: the committed token)
        first_row = torch.as_tensor([cu[r] + r for r in range(reqs)], dtype=torch.int64, device=dev)
        self.rows = (first_row[:, None] + node[None, :]) * self.used  # target row of each used node
        self.req_of_row = torch.arange(reqs, device=dev)[:, None].expand(reqs, nodes)[self.used]
        self.candidates = torch.zeros((reqs, nodes), dtype=torch.int64, device=dev)
        draft_slot = (node[None, :] >= 1) & self.used
        self.candidates[draft_slot] = batch.draft_token_ids.to(device=dev, dtype=torch.int64)
        self.retrive_index = torch.arange(reqs * nodes, dtype=torch.int64, device=dev).reshape(reqs, nodes)
        self.retrive_next_token = torch.where(node[None, :] < k, node[None, :] + 1, -1).to(torch.int64)
        self.retrive_next_sibling = torch.full((reqs, nodes), -1, dtype=torch.int64, device=dev)
        self.predicts = torch.empty(reqs * nodes + 1, dtype=torch.int32, device=dev)
        self.accept_index = torch.full((reqs, nodes), -1, dtype=torch.int32, device=dev)
        self.accept_length = torch.empty(reqs, dtype=torch.int32, device=dev)

    def outputs(self) -> tuple:
        return self.predicts, self.accept_index, self.accept_length

    def structure(self) -> tuple:
        return self.candidates, self.retrive_index, self.retrive_next_token, self.retrive_next_sibling

    def emitted(self) -> VerifyOutput:
        """Tokens ``predicts[accept_index[b, j]]`` up to the first ``-1``; ``num = accept_length + 1``."""
        index = self.accept_index.to(torch.int64)
        live = torch.cumprod((index >= 0).to(torch.int64), dim=1).bool()
        ids = torch.where(live, self.predicts.to(torch.int64)[index.clamp(min=0)], -1)
        return VerifyOutput(output_token_ids=ids, num_emitted=self.accept_length.to(torch.int32) + 1)


def chain_tree(batch: VerifyBatch) -> ChainTree:
    """A chain per request in SGLang's tree format (module docstring)."""
    return ChainTree(batch)


chain = SglangChain()
