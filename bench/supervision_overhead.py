"""What supervision costs on the healthy path: kernel calls in a worker process vs in this process.

    python bench/supervision_overhead.py [--kernel SPEC] [--device cpu|cuda] [--profile ci|gpu]
                                         [--cases 40] [--repeat 30] [--seed 0]

Two tables, each timed in this process and through ``harness.execution.supervisor`` (one worker, started and
warmed up before timing, as in a run):

1. per call: the median of ``--repeat`` ``verify`` calls on fixed batch shapes, and the bytes that
   cross (argument storages out, result storages back);
2. per case: ``structural`` (three kernel calls, guard bands, the checks) on ``--cases`` cases drawn
   with a seeded generator inside the profile's sizes, the same cases both ways; the difference of
   the totals divided by the cases is the overhead per case.

Both ways run the same cases in the same order, alternating by case, so drift in machine load hits
both. Wall time and CPU time are both shown: CPU time (this process, plus the worker's from
``/proc/PID/stat``, so Linux only) is what a shared, overloaded machine cannot distort. Prints the seed.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import kernels._device  # noqa: E402,F401  (before triton)
from harness.execution.supervisor import close, supervise  # noqa: E402
from harness.execution.transport import Packer  # noqa: E402
from harness.generation.cases import Case, build_batch  # noqa: E402
from harness.plugins import load_kernel  # noqa: E402
from harness.profiles import PROFILES  # noqa: E402
from harness.properties.base import RunContext  # noqa: E402
from harness.properties.structural import Structural  # noqa: E402

SHAPES = {  # (V, requests, drafts each, dtype)
    "cpu": [(300, 4, 4, "float32"), (4096, 8, 4, "float32"), (32000, 8, 4, "float32")],
    "cuda": [(32000, 8, 4, "bfloat16"), (131072, 32, 4, "bfloat16"), (262144, 64, 4, "bfloat16")],
}


def shape_case(vocab: int, reqs: int, k: int, dtype: str) -> Case:
    return Case(vocab, [k] * reqs, [1.0] * reqs, list(range(reqs)), [0] * reqs, dtype=dtype)


def drawn_cases(profile, n: int, seed: int) -> list[Case]:
    """``n`` cases within the profile's sizes (V, requests, drafts, logit elements), seeded."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        reqs = int(rng.integers(1, profile.max_reqs + 1))
        lens = [int(x) for x in rng.integers(0, profile.max_draft + 1, size=reqs)]
        vocab = int(rng.integers(2, profile.max_vocab + 1))
        if vocab * (sum(lens) + reqs) > profile.max_logit_elements:
            continue
        temps = [float(t) for t in rng.choice([0.0, 0.5, 1.0], size=reqs)]
        seeds = [int(s) for s in rng.integers(0, 2**31, size=reqs)]
        out.append(Case(vocab, lens, temps, seeds, [0] * reqs, data_seed=int(rng.integers(2**31))))
    return out


def worker_cpu_s(kernel) -> float:
    """CPU seconds used so far by the worker of a supervised kernel (0 for an in-process one)."""
    pid = getattr(getattr(kernel, "supervisor", None), "worker_pid", lambda: None)()
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(kernel, fn) -> tuple[float, float]:
    """``fn()``'s wall and CPU seconds (this process plus the kernel's worker)."""
    w0, c0 = time.perf_counter(), time.process_time() + worker_cpu_s(kernel)
    fn()
    return time.perf_counter() - w0, time.process_time() + worker_cpu_s(kernel) - c0


def median_call_ms(kernel, batch, repeat: int) -> tuple[float, float]:
    """Median wall ms of one call, and mean CPU ms over the calls (CPU clocks tick at 10 ms)."""

    def call():
        kernel.verify(batch)
        if batch.device.type == "cuda":
            torch.cuda.synchronize()

    walls, cpu = [], 0.0
    for _ in range(repeat):
        wall, c = timed(kernel, call)
        walls.append(wall)
        cpu += c
    return 1e3 * statistics.median(walls), 1e3 * cpu / repeat


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="harness.adapters.triton_kernels:kernel")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--profile", default=None, help="default: gpu on cuda, ci on cpu")
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    profile = PROFILES[args.profile or ("gpu" if device.type == "cuda" else "ci")]
    plain = load_kernel(args.kernel)
    supervised = supervise(plain, args.kernel, profile)
    print(f"kernel {args.kernel}, device {device}, profile {profile.name}, seed {args.seed}")
    try:
        warm = build_batch(shape_case(64, 2, 2, "float32"), device)
        plain.verify(warm), supervised.verify(warm)  # worker start and first compiles, untimed

        print(f"\n## per call (median of {args.repeat} verify calls)")
        print(
            f"{'V':>7s} {'reqs':>4s} {'k':>2s} {'dtype':>8s} {'MB out':>7s} {'wall: in-process':>16s} "
            f"{'supervised':>10s} {'overhead':>9s} {'cpu: in-process':>16s} {'supervised':>10s} "
            f"{'overhead':>9s}  (ms)"
        )
        for vocab, reqs, k, dtype in SHAPES[device.type]:
            batch = build_batch(shape_case(vocab, reqs, k, dtype), device)
            packer = Packer()
            packer.pack((batch,))
            mb = sum(s.numel() for s in packer.storages) / 2**20
            plain.verify(batch), supervised.verify(batch)  # compiles for this shape, untimed
            (a, ac), (b, bc) = (median_call_ms(k, batch, args.repeat) for k in (plain, supervised))
            print(
                f"{vocab:7d} {reqs:4d} {k:2d} {dtype:>8s} {mb:7.2f} {a:16.2f} {b:10.2f} {b - a:9.2f} "
                f"{ac:16.2f} {bc:10.2f} {bc - ac:9.2f}",
                flush=True,
            )

        cases = drawn_cases(profile, args.cases, args.seed)
        prop = Structural()
        ctxs = {w: RunContext(profile, device, args.seed, args.kernel) for w in ("in", "sup")}
        for case in cases[:3]:  # compiles of the first shapes, untimed
            prop.check_guarded(plain, case, ctxs["in"]), prop.check_guarded(supervised, case, ctxs["sup"])
        wall, cpu = {"in": 0.0, "sup": 0.0}, {"in": 0.0, "sup": 0.0}
        for case in cases:
            for way, kernel in (("in", plain), ("sup", supervised)):
                outcome = []
                check = functools.partial(prop.check_guarded, kernel, case, ctxs[way])
                w, c = timed(kernel, lambda check=check, outcome=outcome: outcome.append(check()))
                wall[way] += w
                cpu[way] += c
                if outcome[0].findings:
                    print(f"  {way}: {outcome[0].findings[0].cls} on {case.summary()}")
        print(f"\n## per case (structural, {len(cases)} cases of the {profile.name} profile)")
        for name, total in (("wall", wall), ("cpu", cpu)):
            per_in, per_sup = (1e3 * total[w] / len(cases) for w in ("in", "sup"))
            print(
                f"{name}: in-process {per_in:.2f} ms/case, supervised {per_sup:.2f} ms/case, "
                f"overhead {per_sup - per_in:.2f} ms/case ({100 * (per_sup / max(per_in, 1e-9) - 1):.0f} %)"
            )
        print(
            f"worker starts: {supervised.supervisor.workers_started}, faults: {supervised.supervisor.faults}"
        )
    finally:
        close(supervised)
    return 0


if __name__ == "__main__":
    sys.exit(main())
