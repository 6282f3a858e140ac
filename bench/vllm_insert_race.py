"""Hunt vLLM 0.33.0's ``_insert_resampled_kernel`` race on large batches, judged by coupled exactness.

vLLM 0.34.0 launches ``_insert_resampled_kernel`` with ``num_warps=1`` because several warps could see
the kernel's own in-place ``num_sampled`` increment before they read it (0.33.0 launches it with the
default warps). A warp that reads the incremented value looks at the next row: it may take the
greedy early exit where it should not, or skip it where it should, and the cross-warp argmax then
runs with part of the block. This script gives that race many chances: batches of ``--requests``
requests with ``--drafts`` drafts each, greedy and sampled requests interleaved, greedy drafts equal
to their rows' argmax up to a rejection at the last draft (where the next row is the bonus row, so the
early-exit decision differs between the two readings), sampled requests with draft logits close to the
target (rejections at every slot). Every output is compared with the float64 oracle on vLLM's own
uniforms (``harness.adapters.vllm:mrv2.random_draws``): greedy rows exactly, sampled rows decision by
decision with the coupled check's tie margins. It prints one line per round and a total.

  PYTHONPATH=. python bench/vllm_insert_race.py --rounds 10 --requests 2048 --drafts 8 --vocab 2048

Needs CUDA and an importable vLLM (exits 0 with a line saying so otherwise).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from harness.contract import VerifyBatch


def race_batch(rng: np.random.Generator, requests: int, drafts: int, vocab: int, method: str,
               dev: torch.device) -> VerifyBatch:
    """Greedy (even requests) and sampled (odd) requests, ``drafts`` each, on ``dev``."""
    rows = requests * (drafts + 1)
    target = rng.normal(0.0, 2.0, size=(rows, vocab)).astype(np.float32)
    draft = (target[np.arange(rows) % (drafts + 1) != drafts] +
             rng.normal(0.0, 0.3, size=(requests * drafts, vocab))).astype(np.float32)
    argmax = target.argmax(axis=1).reshape(requests, drafts + 1)
    ids = rng.integers(0, vocab, size=(requests, drafts))
    greedy = np.arange(requests) % 2 == 0
    last_wrong = (argmax[:, drafts - 1] + 1) % vocab
    ids[greedy, : drafts - 1] = argmax[greedy, : drafts - 1]
    ids[greedy, drafts - 1] = last_wrong[greedy]
    temps = np.where(greedy, 0.0, 1.0).astype(np.float32)
    return VerifyBatch(
        target_logits=torch.from_numpy(target).to(dev),
        draft_logits=torch.from_numpy(draft).to(dev),
        draft_token_ids=torch.from_numpy(ids.reshape(-1).astype(np.int64)).to(dev),
        cu_num_draft_tokens=(torch.arange(requests + 1, dtype=torch.int32) * drafts).to(dev),
        temperature=torch.from_numpy(temps).to(dev),
        seeds=torch.from_numpy(rng.integers(0, 2**62, size=requests)).to(dev),
        positions=torch.from_numpy(rng.integers(0, 2**20, size=requests)).to(dev),
        method=method,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=2048)
    parser.add_argument("--drafts", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--method", choices=("token", "block"), default="token")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: the plumbing under Triton's interpreter (small sizes; no race there)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("vllm_insert_race: no CUDA device; nothing run")
        return 0
    dev = torch.device(args.device)
    from harness.adapters import vllm as adapter

    why = adapter.vllm_available()
    if why:
        print(f"vllm_insert_race: {why}; nothing run")
        return 0
    from harness.judging.decision_compare import compare_decisions
    from harness.judging.oracle import run_reference

    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**32)
    print(f"{adapter.mrv2.name}: {args.rounds} rounds x {args.requests} requests x {args.drafts} drafts, "
          f"V = {args.vocab}, {args.method}, seed {seed}")
    rng = np.random.default_rng(seed)
    total_real = total_ties = 0
    for i in range(args.rounds):
        batch = race_batch(rng, args.requests, args.drafts, args.vocab, args.method, dev)
        start = time.perf_counter()
        out = adapter.mrv2.verify(batch)
        accept, sample = adapter.mrv2.random_draws(batch)
        ref = run_reference(batch, accept, sample)
        comparison = compare_decisions(batch, out, ref, False)
        real = comparison.real
        total_real += len(real)
        total_ties += len(comparison.ties)
        first = (f"; first: request {real[0].request} kernel {real[0].kernel_tokens} oracle "
                 f"{real[0].reference_tokens} ({real[0].kind})") if real else ""
        print(f"round {i}: {len(real)} mismatching requests, {len(comparison.ties)} ties, "
              f"{time.perf_counter() - start:.1f} s{first}")
    print(f"total: {total_real} mismatching requests, {total_ties} ties in "
          f"{args.rounds * args.requests} requests")
    return 1 if total_real else 0


if __name__ == "__main__":
    raise SystemExit(main())
