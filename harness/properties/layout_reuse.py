"""Layer 3: a kernel that keeps per-layout state (plans, captured graphs, cached metadata) must not
let one call's values leak into the next call of the same layout.

Serving engines repeat their batch shapes step after step, and kernels exploit it: CUDA graphs
captured per shape, host-side plans keyed by shapes, workspaces sized once. The bug class is state
keyed by too little: a graph replayed with the draft lengths it was captured with, a plan that
recorded one output width and replays it for another, metadata read at capture time. Every other
property draws a fresh layout per case, so such state is never exercised twice with different values.

``layout_reuse`` builds, from a case, a batch ``B`` of at least ``MIN_REQUESTS`` requests (the case's
requests repeated: size-dependent paths such as our kernels' replay plans start beyond 4; the gpu
profile's batches of up to 256 requests reach larger thresholds) and a
sibling ``S`` with exactly ``B``'s shapes, dtypes and strides but other values: other draft lengths
with the same total, none above the kernel's declared ``max_draft_len`` (so another output width
where the total allows), other logits, draft ids,
temperatures, seeds and positions. It calls ``B, B, S, B`` in that order (the second call of a
layout is where a plan records, the third where it replays) and compares:

- each later call of ``B`` with its first (``layout_reuse_repeat``);
- ``S``'s output with a witness: ``S`` with one request without drafts appended, other shapes, so
  per-layout state of ``B`` cannot serve it, and by batch invariance each of ``S``'s requests has the
  same output there (``layout_reuse_stale``).

Any difference is a bug: either state carried between calls or a batch-invariance failure (which
``batch_invariance`` then reports too). Needs no randomness hooks: kernels are compared with
themselves.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from harness.contract import VerifyBatch, capabilities_of
from harness.generation.batch_edit import select_requests
from harness.generation.cases import Case, build_batch
from harness.properties.base import RunContext, register
from harness.properties.case_property import CaseCheck, CaseProperty
from harness.properties.invariance import run_checked, same_requests

MIN_REQUESTS = 5


def at_least(batch: VerifyBatch, count: int) -> VerifyBatch:
    """``batch``'s requests repeated in order until there are at least ``count`` of them."""
    reps = -(-count // batch.num_reqs)
    return select_requests(batch, list(range(batch.num_reqs)) * reps) if reps > 1 else batch


def other_lengths(lengths: list[int], max_len: int) -> list[int]:
    """Draft lengths with the same count and total, none above ``max_len`` (the kernel's declared
    ``max_draft_len``), whose longest differs from ``lengths``' where that is possible: the drafts
    piled onto the last requests, else spread as evenly as possible, else ``lengths`` reversed."""
    total, count = sum(lengths), len(lengths)
    max_len = max(max_len, 1)  # a kernel declaring 0 has no drafts to move
    full, rest = divmod(total, max_len)  # lengths within max_len: full <= count, rest 0 if full == count
    piled = [0] * (count - full) + [max_len] * full
    if rest:
        piled[count - 1 - full] = rest
    even = [total // count + (i < total % count) for i in range(count)]
    for differs in (lambda c: max(c) != max(lengths), lambda c: c != lengths):
        for candidate in (piled, even, lengths[::-1]):
            if differs(candidate):
                return candidate
    return list(lengths)


def same_layout_sibling(batch: VerifyBatch, rng: np.random.Generator, max_len: int) -> VerifyBatch:
    """A batch with ``batch``'s shapes, dtypes and strides and other values (module docstring), no
    draft longer than ``max_len``."""
    lengths = other_lengths(batch.draft_lengths(), max_len)
    cu = torch.tensor(np.concatenate(([0], np.cumsum(lengths))), dtype=batch.cu_num_draft_tokens.dtype,
                      device=batch.device)
    ids = torch.from_numpy(rng.integers(0, batch.vocab_size, batch.num_draft_total)).to(
        batch.draft_token_ids.dtype).to(batch.device)
    return replace(
        batch,
        target_logits=batch.target_logits.flip(0).contiguous(),
        draft_logits=None if batch.draft_logits is None else batch.draft_logits.flip(0).contiguous(),
        draft_token_ids=ids,
        cu_num_draft_tokens=cu,
        temperature=batch.temperature.roll(1).contiguous(),
        seeds=(batch.seeds + 7919).contiguous(),
        positions=batch.positions.roll(1).contiguous(),
    )


def with_empty_requests(batch: VerifyBatch, count: int) -> VerifyBatch:
    """``batch`` and ``count`` more requests without drafts (target row: a copy of row 0; seeds above
    the batch's)."""
    last = batch.cu_num_draft_tokens[-1:]
    new_seeds = batch.seeds.max() + 1 + torch.arange(count, device=batch.device)
    return replace(
        batch,
        target_logits=torch.cat([batch.target_logits, batch.target_logits[:1].expand(count, -1)]),
        cu_num_draft_tokens=torch.cat([batch.cu_num_draft_tokens, last.expand(count)]),
        temperature=torch.cat([batch.temperature, batch.temperature[:1].expand(count)]),
        seeds=torch.cat([batch.seeds, new_seeds]),
        positions=torch.cat([batch.positions, batch.positions[:1].expand(count)]),
    )


class LayoutReuse(CaseProperty):
    name = "layout_reuse"
    layer = 3
    summary = "a call of a layout seen before (same shapes, other values) gives a fresh layout's output"
    plans_with_constant_answers = True  # compares calls with each other only; outputs decide no call

    def check(self, kernel, case: Case, ctx: RunContext) -> CaseCheck:
        caps = capabilities_of(kernel)
        base = at_least(build_batch(case, ctx.device), MIN_REQUESTS)
        sibling = same_layout_sibling(base, np.random.default_rng(case.data_seed), caps.max_draft_len)
        with_lp = base.want_logprobs and caps.logprobs
        calls = []
        for name, batch in (("B", base), ("B again", base), ("S", sibling), ("B after S", base),
                            ("S + 1 empty request", with_empty_requests(sibling, 1))):
            out, broken = run_checked(kernel, batch, caps.logprobs)
            if broken:
                for f in broken.findings:
                    f.message = f"{name} (layout_reuse sequence B, B, S, B): {f.message}"
                return broken
            calls.append(out)
        first, again, other, after, other_witness = calls
        lengths = {"B": base.draft_lengths(), "S": sibling.draft_lengths()}
        for cls, what, expected, got in (
            ("layout_reuse_repeat", "the second call of B vs its first", first, again),
            ("layout_reuse_repeat", "B after S (same shapes) vs B's first call", first, after),
            ("layout_reuse_stale", "S with one more request vs S after B (same shapes)", other_witness,
             other),
        ):
            f = same_requests(cls, what, expected, got, base.num_reqs, with_lp)
            if f is not None:
                f.evidence["draft_lengths"] = lengths
                return CaseCheck([f])
        return CaseCheck()


register(LayoutReuse())
