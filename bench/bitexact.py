"""Hashes of ``kernels.rejection_sample``'s outputs over a fixed set of batches: one line per case.

Run it on two trees and ``diff`` the outputs to show that a change kept every result bit for bit. It
imports nothing but torch and ``kernels`` (whichever ``kernels`` package is first on ``PYTHONPATH``),
so the same script checks an older tree:

    PYTHONPATH=before python bench/bitexact.py > before.txt   # before/kernels: the old package
    PYTHONPATH=. python bench/bitexact.py > after.txt
    diff before.txt after.txt && echo identical

The default cases are GPU sizes and take every path the default configuration chooses by size: the
single small-batch launch (at most 4 requests), the separate launches, the pruned race (from 2^25
raced entries on), chunked calls (some chunks small enough for the single launch), greedy rows,
near-one-hot rows at low temperature (deep tails), requests without drafts, token and block
verification with draft logits and with point-mass drafts, bf16, fp16 and fp32, with and without
logprobs. Each case is verified three times: a first call, a repeated call of the same layout (which
a call plan runs) and a call with host ``draft_lengths``; the line's hash covers all three.
``--small`` runs small sizes for the CPU interpreter. Inputs come from a seeded generator on the
device, so both runs must use the same machine and torch.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time

import torch

import kernels

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32

# name: (requests, max drafts, vocab, dtype, method, draft logits, greedy fraction, logit scale,
#        temperature range, max_chunk_bytes, want_logprobs)
GPU_CASES = {
    "single-req-token-bf16": (1, 4, 151936, BF16, "token", True, 0.0, 1.0, (0.5, 1.5), 1 << 30, True),
    "small-block-logits-fp32": (4, 6, 128256, FP32, "block", True, 0.25, 1.0, (0.5, 1.5), 1 << 30, True),
    "small-block-point-fp16": (3, 5, 32000, FP16, "block", False, 0.34, 1.0, (0.5, 1.5), 1 << 30, False),
    "separate-token-logits-bf16": (16, 8, 32000, BF16, "token", True, 0.25, 1.0, (0.3, 1.5), 1 << 30, True),
    "separate-block-logits-fp32": (64, 8, 151936, FP32, "block", True, 0.1, 2.0, (0.5, 1.5), 1 << 30, True),
    "separate-token-point-fp16": (40, 3, 128256, FP16, "token", False, 0.2, 1.0, (0.5, 1.5), 1 << 30, False),
    "pruned-token-point-bf16": (256, 4, 151936, BF16, "token", False, 0.1, 1.0, (0.5, 1.5), 1 << 30, True),
    "pruned-block-logits-bf16": (512, 8, 262144, BF16, "block", True, 0.0, 1.0, (0.5, 1.5), None, False),
    "pruned-token-logits-fp32": (160, 2, 262144, FP32, "token", True, 0.2, 1.0, (0.5, 1.5), 1 << 30, True),
    # budgets of about 21 and 16 rows a chunk: chunks of 2-10 requests, on both sides of the single
    # launch's threshold of 4
    "chunked-block-logits-bf16": (96, 4, 128256, BF16, "block", True, 0.2, 1.0, (0.5, 1.5), 1 << 14, True),
    "chunked-token-point-fp32": (50, 6, 32000, FP32, "token", False, 0.2, 1.0, (0.5, 1.5), 1 << 12, True),
    "deep-tails-token-logits-fp32": (8, 4, 32000, FP32, "token", True, 0.0, 30.0, (0.02, 0.1), 1 << 30, True),
    "deep-tails-block-logits-bf16": (24, 4, 151936, BF16, "block", True, 0.0, 30.0, (0.02, 0.1), 1 << 30,
                                     True),
    "all-greedy-token-fp32": (32, 6, 128256, FP32, "token", True, 1.0, 1.0, (0.5, 1.5), 1 << 30, True),
}

CPU_CASES = {
    "single-req-token-bf16": (1, 4, 700, BF16, "token", True, 0.0, 1.0, (0.5, 1.5), 1 << 30, True),
    "small-block-logits-fp32": (4, 5, 600, FP32, "block", True, 0.25, 1.0, (0.5, 1.5), 1 << 30, True),
    "small-block-point-fp16": (3, 4, 300, FP16, "block", False, 0.34, 1.0, (0.5, 1.5), 1 << 30, False),
    "separate-token-logits-bf16": (7, 4, 1000, BF16, "token", True, 0.25, 1.0, (0.3, 1.5), 1 << 30, True),
    "separate-block-logits-fp32": (6, 5, 900, FP32, "block", True, 0.1, 2.0, (0.5, 1.5), 1 << 30, True),
    "separate-token-point-fp16": (6, 3, 500, FP16, "token", False, 0.2, 1.0, (0.5, 1.5), None, False),
    "chunked-block-logits-bf16": (9, 3, 600, BF16, "block", True, 0.2, 1.0, (0.5, 1.5), 2048, True),
    "deep-tails-token-logits-fp32": (5, 3, 400, FP32, "token", True, 0.0, 30.0, (0.02, 0.1), 1 << 30, True),
    "all-greedy-token-fp32": (6, 4, 800, FP32, "token", True, 1.0, 1.0, (0.5, 1.5), 1 << 30, True),
}


def make_batch(seed: int, reqs: int, max_k: int, vocab: int, dtype, with_draft: bool, greedy: float,
               scale: float, temps: tuple[float, float], device):
    """A ragged batch (some requests without drafts) with drafts sampled from the draft rows (point
    mass: from the target rows), all from one seeded generator on ``device``."""
    g = torch.Generator(device=device).manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=g, device=device)
    lengths = (rand(reqs) * (max_k + 1)).long().clamp(max=max_k)
    if reqs > 2:
        lengths[0], lengths[1] = 0, max_k  # a request without drafts, and the widest one
    lengths = lengths.tolist()
    num_drafts = sum(lengths)
    cu = torch.tensor([0] + lengths, device=device).cumsum(0).to(torch.int32)
    target = torch.randn(num_drafts + reqs, vocab, generator=g, device=device) * scale
    temperature = temps[0] + rand(reqs) * (temps[1] - temps[0])
    temperature = torch.where(rand(reqs) < greedy, torch.zeros_like(temperature), temperature)
    req_of_slot = torch.repeat_interleave(torch.arange(reqs, device=device),
                                          torch.tensor(lengths, device=device))
    rows = torch.arange(num_drafts, device=device) + req_of_slot  # slot j of request r: row cu[r] + r + j
    draft = None
    source = target[rows] if num_drafts else target[:0]
    if with_draft:
        draft = source + 0.5 * torch.randn(num_drafts, vocab, generator=g, device=device) * scale
        source = draft
    t = temperature[req_of_slot].clamp(min=0.05)[:, None]
    gumbel = -torch.log(-torch.log(rand(num_drafts, vocab).clamp(1e-12, 1 - 1e-7)))
    draft_ids = (source / t + gumbel).argmax(-1) if num_drafts else torch.zeros(0, dtype=torch.long,
                                                                                  device=device)
    seeds = (rand(reqs) * 2**40).long()
    positions = (rand(reqs) * 4096).long()
    args = (target.to(dtype), None if draft is None else draft.to(dtype), draft_ids.long(), cu,
            temperature.float(), seeds, positions)
    return args, lengths


def digest(h, outputs) -> None:
    for t in outputs:
        h.update(b"None" if t is None else t.detach().cpu().contiguous().numpy().tobytes())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="CPU-interpreter sizes")
    p.add_argument("--cases", nargs="*", help="only these cases")
    args = p.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.small else "cpu")
    cases = CPU_CASES if args.small else GPU_CASES
    total = hashlib.sha256()
    for i, (name, spec) in enumerate(cases.items()):
        if args.cases and name not in args.cases:
            continue
        reqs, max_k, vocab, dtype, method, with_draft, greedy, scale, temps, budget, logprobs = spec
        start = time.perf_counter()
        batch, lengths = make_batch(1000 + i, reqs, max_k, vocab, dtype, with_draft, greedy, scale, temps,
                                    device)
        h = hashlib.sha256()
        kw = dict(method=method, max_chunk_bytes=budget, want_logprobs=logprobs)
        first = kernels.rejection_sample(*batch, **kw)
        again = kernels.rejection_sample(*batch, **kw)  # the same layout: a call plan where one applies
        host = kernels.rejection_sample(*batch, **kw, draft_lengths=lengths)
        for out in (first, again, host):
            digest(h, out)
        total.update(h.digest())
        emitted = int(first[1].sum())
        print(f"{name:32s} {h.hexdigest()[:32]}  emitted={emitted}  ({time.perf_counter() - start:.1f} s)",
              file=sys.stderr)
        print(f"{name:32s} {h.hexdigest()}")
        del batch, first, again, host
    print(f"{'all':32s} {total.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
