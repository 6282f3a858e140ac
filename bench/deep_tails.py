"""Cost of the deep-tail path (kernels/deep_tails.py, run by the decide kernel) and kernel registers.

    python bench/deep_tails.py [--requests 1 128 512] [--vocabs 32000 262144] [--rep 20]

For each shape, three token batches with one draft per request, all rejected: ``plain`` (T = 1,
Gaussian logits: no row is deep), ``split`` (T = 1e-6, target and draft near one-hot on different
modes: deep rows, so the decide kernel looks up the target's mode, but no deep race) and ``deep`` (the same
on a shared mode: every request takes the deep-tail race in the decide kernel). Prints the median
time of a no-sync call (host ``draft_lengths``) with CUDA events, whether every deep request emitted
the mode, and the registers and spills of every compiled kernel variant.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import kernels  # noqa: E402
from bench.bench_kernels import print_registers  # noqa: E402


def batch(reqs: int, vocab: int, kind: str, dtype=torch.float32, seed: int = 0):
    gen = np.random.default_rng(seed)
    if kind != "plain":  # logits / T: 0 on the modes, the rest e^-435.6 .. e^-2000
        t, d = np.full((2 * reqs, vocab), -1.11e-3), np.full((reqs, vocab), -2e-3)
        t[:, 0] = 0.0
        d[:, 0 if kind == "deep" else 2] = 0.0
        d[:, 1] = -4.356e-4
        temperature = np.full(reqs, 1e-6)
        ids = np.full(reqs, 1 if kind == "deep" else 2, dtype=np.int64)
    else:
        t, d = gen.standard_normal((2 * reqs, vocab)), gen.standard_normal((reqs, vocab))
        temperature = np.ones(reqs)
        ids = np.argmin(d - t[0::2], axis=1)  # q >> b there: rejected almost surely
    cuda = lambda a, dt: torch.tensor(a, dtype=dt, device="cuda")
    return (cuda(t, dtype), cuda(d, dtype), cuda(ids, torch.int64),
            cuda(np.arange(reqs + 1), torch.int32), cuda(temperature, torch.float32),
            cuda(gen.integers(0, 2**62, reqs), torch.int64), cuda(gen.integers(0, 2**40, reqs), torch.int64))


def median_us(fn, rep: int) -> float:
    import triton.testing

    fn()
    return triton.testing.do_bench(fn, warmup=5, rep=rep, return_mode="median") * 1e3


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, nargs="+", default=[1, 128, 512])
    p.add_argument("--vocabs", type=int, nargs="+", default=[32000, 262144])
    p.add_argument("--rep", type=int, default=20)
    args = p.parse_args(argv)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'reqs':>5} {'V':>7} {'plain us':>9} {'split us':>9} {'deep us':>9} {'deep emits mode':>16}")
    for reqs in args.requests:
        for vocab in args.vocabs:
            times, emitted = {}, None
            for kind in ("plain", "split", "deep"):
                b = batch(reqs, vocab, kind)
                call = lambda b=b, n=reqs: kernels.rejection_sample(*b, method="token", draft_lengths=[1] * n)
                times[kind] = median_us(call, args.rep)
                if kind == "deep":
                    ids, num, _ = call()
                    emitted = bool(((ids[:, 0] == 0) & (num == 1)).all())
            print(f"{reqs:>5} {vocab:>7} {times['plain']:>9.1f} {times['split']:>9.1f} {times['deep']:>9.1f} "
                  f"{emitted!s:>16}", flush=True)
    print_registers()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
