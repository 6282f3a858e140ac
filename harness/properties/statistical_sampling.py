"""Drawing many outcomes from a kernel with its OWN randomness, and histogramming them on its device.

A statistical assertion replicates requests (same rows, fresh seeds; or fresh drafts per replica) in
large batches, maps each output to one cell of a categorical law with tensor ops, and accumulates
``torch.bincount`` counts on the kernel's device: no Python loop ever runs over samples. An output
that breaks the contract (``num_emitted`` out of range, accepted prefix != drafts, id outside
``[0, V)``) lands in a dedicated cell of probability 0, i.e. a certain failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import torch

from harness.contract import VerifyBatch, VerifyOutput
from harness.execution.transport import tiled
from harness.profiles import Profile

# Bonferroni budget: the statistical properties of harness.properties.statistical* make at most this
# many first-stage assertions per run, each at ``alpha_family / STAT_ASSERTION_BUDGET``.
STAT_ASSERTION_BUDGET = 40
SEED_SPACE = 1 << 62
# Bytes of replicated logits one batch may hold (target + draft rows, float32).
_BATCH_BYTES = {"cpu": 64 << 20, "cuda": 2 << 30}
_MAX_BATCH = {"cpu": 16384, "cuda": 1 << 20}


def assertion_alpha(profile: Profile) -> float:
    """The level of every first-stage statistical assertion (Bonferroni share of the run's budget)."""
    return profile.alpha_family / STAT_ASSERTION_BUDGET


def batch_size(device: torch.device, rows_per_request: int, vocab: int, n: int) -> int:
    """Replicas per kernel call: bounded by a memory budget, a per-device cap, and ``n``."""
    kind = "cuda" if device.type == "cuda" else "cpu"
    by_memory = max(1, _BATCH_BYTES[kind] // max(1, rows_per_request * vocab * 4))
    return int(max(1, min(by_memory, _MAX_BATCH[kind], n)))


def replicate(base: VerifyBatch, replicas: int) -> VerifyBatch:
    """``base`` (one request) repeated ``replicas`` times (seeds to be filled in by ``with_seeds``).
    The logits are ``tiled``: a supervised call ships one request's rows, not the batch's."""
    if base.num_reqs != 1:
        raise ValueError("replicate expects a one-request batch")
    k = base.max_draft_len
    rep = lambda t: None if t is None else tiled(t, replicas)
    return replace(
        base,
        target_logits=rep(base.target_logits),
        draft_logits=rep(base.draft_logits),
        draft_token_ids=rep(base.draft_token_ids),
        cu_num_draft_tokens=torch.arange(replicas + 1, dtype=torch.int32, device=base.device) * k,
        temperature=base.temperature.repeat(replicas),
        seeds=base.seeds.repeat(replicas),
        positions=base.positions.repeat(replicas),
    )


def seed_block(root: int, start: int, count: int, device: torch.device) -> torch.Tensor:
    """``count`` distinct int64 seeds ``root + start + i`` (mod 2^62), built on ``device``."""
    return (torch.arange(count, dtype=torch.int64, device=device) + (root + start)) % SEED_SPACE


def emitted_tau(out: VerifyOutput, draft_ids: torch.Tensor, k: int, vocab: int) -> torch.Tensor:
    """``tau`` per replica (all replicas have ``k`` drafts, ``draft_ids [R, k]``), or -1 where the output
    breaks the contract: ``num_emitted`` outside ``[1, k+1]``, an accepted id != its draft, the final id
    outside ``[0, V)``."""
    tau = out.num_emitted.to(torch.int64) - 1
    ids = out.output_token_ids.to(torch.int64)
    in_range = (tau >= 0) & (tau <= k) & (ids.dim() == 2) & (ids.shape[1] >= k + 1)
    tau_safe = tau.clamp(0, k)
    rows = torch.arange(tau.numel(), device=tau.device)
    final = ids[rows, tau_safe]
    if k:
        before = torch.arange(k, device=tau.device)[None, :] < tau_safe[:, None]
        prefix_ok = torch.where(before, ids[:, :k] == draft_ids, True).all(dim=1)
    else:
        prefix_ok = torch.ones_like(in_range)
    ok = in_range & prefix_ok & (final >= 0) & (final < vocab)
    return torch.where(ok, tau_safe, -1)


def final_token(out: VerifyOutput, tau: torch.Tensor) -> torch.Tensor:
    """The correction/bonus token ``output_token_ids[r, tau_r]`` (0 where ``tau == -1``)."""
    rows = torch.arange(tau.numel(), device=tau.device)
    return out.output_token_ids.to(torch.int64)[rows, tau.clamp(min=0)]


def count_cells(
    kernel: object,
    batches: Iterator[tuple[VerifyBatch, object]],
    cell_of: Callable[[VerifyOutput, VerifyBatch, object], torch.Tensor],
    num_cells: int,
) -> torch.Tensor:
    """Run the kernel on every batch and histogram ``cell_of(output, batch, aux)`` on the device.

    ``cell_of`` returns a cell per request in ``[0, num_cells]``; ``num_cells`` itself is the
    contract-violation cell. Returns int64 counts ``[num_cells + 1]`` on the CPU.
    """
    counts = None
    for batch, aux in batches:
        out = kernel.verify(batch)
        cells = cell_of(out, batch, aux).to(torch.int64)
        cells = torch.where((cells >= 0) & (cells <= num_cells), cells, num_cells)
        hist = torch.bincount(cells, minlength=num_cells + 1)
        counts = hist if counts is None else counts + hist
    return counts.cpu() if counts is not None else torch.zeros(num_cells + 1, dtype=torch.int64)


def replicated_batches(base: VerifyBatch, n: int, seed_root: int) -> Iterator[tuple[VerifyBatch, None]]:
    """``n`` replicas of the one-request ``base``, in device-sized batches, each with fresh seeds."""
    size = batch_size(base.device, base.target_logits.shape[0] + base.max_draft_len, base.vocab_size, n)
    template = replicate(base, size)
    done = 0
    while done < n:
        count = min(size, n - done)
        batch = template if count == size else replicate(base, count)
        yield replace(batch, seeds=seed_block(seed_root, done, count, base.device)), None
        done += count
