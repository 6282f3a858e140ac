"""Which broken kernels the CPU main job's statistics catch at the interpreter's price (issue 44).

    python bench/cpu_statistics_teeth.py [--price 0.1] [--seeds 0 1 2] [--broken NAME ...]
                                         [--correct-seeds 0 1 2 3 4] [--stat-seconds S]

On a CPU our Triton kernels run under the interpreter at ``--price`` seconds per request (measured:
``python -m harness check`` prints it in each statistical note), so the statistical layer runs
time-sized (harness/properties/statistical.py ``sized_samples``): a few hundred samples per
assertion. This runs the five statistical properties of the ci profile on each broken kernel of
``harness.broken`` (fast: they are PyTorch) with the layer told that the kernel costs ``--price`` per
request, and prints per kernel and seed which property rejected it; the correct PyTorch implementation
at the same price over ``--correct-seeds`` counts false alarms. Seconds per property: the ci
profile's fixed ones (conditional 30, marginal 40, first-token 20), about what ``check``'s 300 s
window gave them in the CPU runs of 2026-12-06 (27-34, 34-40, 19-40 s); ``--stat-seconds S`` sets
conditional's to S and the others in the same proportion (twice and four times the seconds: 60, 120).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import kernels._device  # noqa: E402,F401  (selects TRITON_INTERPRET before triton is imported)
from harness.broken import CATALOGUE  # noqa: E402
from harness.plugins import load_kernel  # noqa: E402
from harness.profiles import PROFILES  # noqa: E402
from harness.properties import REGISTRY  # noqa: E402
from harness.properties.base import FAIL, RunContext  # noqa: E402

STATISTICAL = ("conditional_law", "marginal_law", "first_token_law", "expected_accepted",
               "block_dominates_token")
CORRECT = "harness.implementations.torch_eager:kernel"


class PricedKernel:
    """A fast kernel the statistical layer is told costs ``price`` seconds per request."""

    def __init__(self, spec: str, ctx: RunContext, price: float):
        self.inner = load_kernel(spec)
        self.name, self.methods = self.inner.name, self.inner.methods
        self.capabilities = self.inner.capabilities
        ctx.extra["statistical_kernel_cost"] = {id(self): (0.0, price)}

    def verify(self, batch):
        return self.inner.verify(batch)


def run(spec: str, seed: int, price: float, stat_seconds: float | None = None
        ) -> tuple[list[str], list[float], float]:
    """(properties that failed, detectable TVs of every assertion, seconds)."""
    ctx = RunContext(PROFILES["ci"], torch.device("cpu"), seed, spec)
    if stat_seconds:
        ctx.extra["stat_seconds_per_property"] = stat_seconds
    kernel = PricedKernel(spec, ctx, price)
    started = time.perf_counter()
    failed, tvs = [], []
    for name in STATISTICAL:
        result = REGISTRY[name].run(kernel, ctx)
        tvs += [s.detectable_tv for s in result.statistics]
        if result.verdict == FAIL:
            failed.append(name)
    return failed, tvs, time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--price", type=float, default=0.1, help="seconds per request (interpreter)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--correct-seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    p.add_argument("--broken", nargs="*", default=None)
    p.add_argument("--stat-seconds", type=float, default=None,
                   help="conditional_law's seconds (the others scaled)")
    args = p.parse_args()
    entries = [b for b in CATALOGUE if not b.fault and (args.broken is None or b.name in args.broken)]
    print(f"price {args.price * 1e3:.0f} ms per request, ci profile, seeds {args.seeds} "
          "(* : harness.broken expects only statistical properties to catch it)")
    caught_any = 0
    for entry in entries:
        cells = []
        for seed in args.seeds:
            failed, tvs, secs = run(entry.spec, seed, args.price, args.stat_seconds)
            cells.append(",".join(failed) or "-")
        caught = sum(c != "-" for c in cells)
        caught_any += caught > 0
        only = "*" if set(entry.expected) <= set(STATISTICAL) else " "
        print(f"{only}{entry.name:37s} caught {caught}/{len(args.seeds)}  {' | '.join(cells)}", flush=True)
    alarms = 0
    for seed in args.correct_seeds:
        failed, tvs, secs = run(CORRECT, seed, args.price, args.stat_seconds)
        alarms += bool(failed)
        print(f"correct seed {seed}: {','.join(failed) or 'pass'}; {len(tvs)} assertions, detectable TV "
              f"{min(tvs, default=0):.2f}-{max(tvs, default=0):.2f}; {secs:.0f}s here", flush=True)
    print(f"{caught_any} of {len(entries)} broken kernels caught by some seed; {alarms} false alarms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
