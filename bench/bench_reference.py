"""Benchmark of the float64 oracle (reference/): prints a table, asserts nothing.

    python bench/bench_reference.py [--requests N] [--repeats R]

Rows: verified requests per second on ONE core for V = 32, g = 4 (token and block), through the
decision-by-decision batch verifier (given uniforms; Philox generation timed separately) and through
the fast inverse-CDF sampler (law built once, then replicated requests); and the time of
``output_law`` for V = 8, g = 4. Targets (issue 2): >= 2e6 requests/s/core, output_law < 1 s.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

import numpy as np  # noqa: E402

from reference import laws, rng, sampling, verify  # noqa: E402

VOCAB, GAMMA = 32, 4


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def random_batch(n: int, gen: np.random.Generator) -> dict:
    cu = np.arange(n + 1) * GAMMA
    return dict(
        target_logits=gen.normal(size=(n * (GAMMA + 1), VOCAB)).astype(np.float32),
        draft_logits=gen.normal(size=(n * GAMMA, VOCAB)).astype(np.float32),
        draft_token_ids=gen.integers(0, VOCAB, n * GAMMA),
        cu_num_draft_tokens=cu,
        temperature=np.ones(n, dtype=np.float32),
    )


class _Table:
    def __init__(self):
        print(f"{'what':58s} {'method':6s} {'value':>14s}")

    def row(self, what: str, method: str, value: str) -> None:
        print(f"{what:58s} {method:6s} {value:>14s}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000, help="batch size for the batch verifier")
    parser.add_argument("--samples", type=int, default=4_000_000, help="draws for the fast sampler")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores visible, 1 used; "
        f"numpy {np.__version__}"
    )
    gen = np.random.default_rng(2026)
    n = args.requests
    batch = random_batch(n, gen)
    seeds, positions = gen.integers(0, 2**62, n), gen.integers(0, 2**40, n)
    cu = batch["cu_num_draft_tokens"]
    u_accept = gen.random(n * GAMMA).astype(np.float32)
    u_sample = gen.random((n * (GAMMA + 1), VOCAB)).astype(np.float32)
    table = _Table()

    t_philox = best_time(
        lambda: (
            rng.accept_uniforms(seeds, positions, cu),
            rng.sampling_uniforms(seeds, positions, cu, VOCAB),
        ),
        args.repeats,
    )
    table.row(f"Philox uniforms for V={VOCAB}, g={GAMMA} (requests/s)", "-", f"{n / t_philox:,.0f}")
    for method in ("token", "block"):
        t = best_time(
            lambda method=method: verify.verify_batch(
                **batch, accept_uniforms=u_accept, sampling_uniforms=u_sample, method=method
            ),
            args.repeats,
        )
        table.row(f"verify_batch V={VOCAB}, g={GAMMA}, batch {n:,} (requests/s)", method, f"{n / t:,.0f}")
    target, draft, ids = (
        batch["target_logits"][: GAMMA + 1],
        batch["draft_logits"][:GAMMA],
        batch["draft_token_ids"][:GAMMA],
    )
    for method in ("token", "block"):
        draws = np.random.default_rng(1)

        def sample_many(method=method, draws=draws):
            return sampling.RequestSampler(target, draft, ids, 1.0, method).sample(args.samples, draws)

        t = best_time(sample_many, args.repeats)
        table.row(
            f"fast sampler V={VOCAB}, g={GAMMA}, {args.samples:,} draws (requests/s)",
            method,
            f"{args.samples / t:,.0f}",
        )

    gen8 = np.random.default_rng(8)
    tables = {}

    def model(name):
        def probs(prefix):
            key = (name, prefix)
            if key not in tables:
                tables[key] = gen8.dirichlet(np.ones(8))
            return tables[key]

        return probs

    target_model, draft_model = model("target"), model("draft")
    laws.output_law(target_model, draft_model, 4, "block")  # fill the model tables once
    for method in ("token", "block"):
        t = best_time(lambda m=method: laws.output_law(target_model, draft_model, 4, m), args.repeats)
        size = len(laws.output_law(target_model, draft_model, 4, method))
        table.row(f"output_law V=8, g=4 ({size:,} outcomes) (seconds)", method, f"{t:.3f}")


if __name__ == "__main__":
    main()
