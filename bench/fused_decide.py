"""Small batches, two settings of the host path interleaved so that host drift hits both alike.

``--compare fused`` (default): the single launch of kernels/fused_decide.py against the separate
launches. ``--compare plans``: repeated layouts with call plans (kernels/call_plan.py) against the
full host path every call, both with the single launch.

Usage (GPU machine): ``PYTHONPATH=. python3 bench/fused_decide.py [--compare plans] [--requests 1 2 4 8
16] [--rounds 5]``. Per shape and setting it prints the median over rounds of: the default path (value
check and its wait included) and the no-sync path (host ``draft_lengths``), both by CUDA events around
one call (``triton.testing.do_bench``), and ``wall``, the back-to-back wall time of a default call. It
also checks that both settings give the same outputs bit for bit (``same``), and ends with a summary:
shapes where the first setting is faster, medians, and shapes below 110 us (vLLM's fastest single
request, issue 3).
"""

from __future__ import annotations

import argparse
import statistics

import torch

import kernels
from bench.bench_kernels import DTYPES, call_args, host_time_us, make_inputs, tuning_overrides

KNOB = "FUSE_DECIDE_MAX_REQS"
COMPARISONS = {
    "fused": {"fused": {KNOB: 1024}, "unfused": {KNOB: 0}},
    "plans": {"plans": {"call_plan.ENABLED": True}, "no plans": {"call_plan.ENABLED": False}},
}


def time_shape(reqs, k, vocab, dtype_name, method, with_draft, rounds, gen, settings):
    import triton.testing

    batch = make_inputs(reqs, k, vocab, DTYPES[dtype_name], with_draft, gen)
    batch_args = call_args(batch)
    lengths = [k] * reqs
    default = lambda: kernels.rejection_sample(*batch_args, method=method, want_logprobs=True)
    nosync = lambda: kernels.rejection_sample(*batch_args, method=method, want_logprobs=True,
                                              draft_lengths=lengths)
    times = {name: {"us": [], "nosync": [], "wall": []} for name in settings}
    outputs = {}
    for _ in range(rounds):
        for name, values in settings.items():
            with tuning_overrides(values):
                outputs[name] = default()
                nosync()
                times[name]["us"].append(1e3 * triton.testing.do_bench(default, warmup=5, rep=20,
                                                                       return_mode="median"))
                times[name]["nosync"].append(1e3 * triton.testing.do_bench(nosync, warmup=5, rep=20,
                                                                           return_mode="median"))
                times[name]["wall"].append(host_time_us(default, 50))
    first, second = outputs.values()
    same = all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    medians = {name: {key: statistics.median(v) for key, v in t.items()} for name, t in times.items()}
    return medians, same


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--draft-lens", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--vocabs", type=int, nargs="+", default=[32000, 262144])
    parser.add_argument("--dtypes", nargs="+", default=["bf16"], choices=sorted(DTYPES))
    parser.add_argument("--methods", nargs="+", default=["token", "block"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="fused")
    args = parser.parse_args()
    settings = COMPARISONS[args.compare]
    one, two = settings
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"reqs  k       V dtype method draft | {one}: us nosync wall | {two}: us nosync wall | same")
    rows = []
    for reqs in args.requests:
        for k in args.draft_lens:
            for vocab in args.vocabs:
                for dtype_name in args.dtypes:
                    for method in args.methods:
                        for with_draft in (True, False):
                            m, same = time_shape(reqs, k, vocab, dtype_name, method, with_draft, args.rounds,
                                                 gen, settings)
                            f, u = m[one], m[two]
                            rows.append((f, u, same))
                            draft = "logits" if with_draft else "point"
                            print(f"{reqs:4d} {k:2d} {vocab:7d} {dtype_name:5s} {method:6s} {draft:6s} | "
                                  f"{f['us']:7.1f} {f['nosync']:6.1f} {f['wall']:6.1f} | "
                                  f"{u['us']:7.1f} {u['nosync']:6.1f} {u['wall']:6.1f} | {same}", flush=True)
    for key in ("us", "nosync", "wall"):
        a, b = [r[0][key] for r in rows], [r[1][key] for r in rows]
        faster = sum(x < y for x, y in zip(a, b, strict=True))
        print(f"{key:6s}: {one} faster on {faster} of {len(rows)}; median "
              f"{statistics.median(a):.1f} / {statistics.median(b):.1f} us; max {max(a):.1f} / {max(b):.1f}; "
              f"below 110 us {sum(x < 110 for x in a)} / {sum(y < 110 for y in b)}")
    print(f"bit-identical: {sum(r[2] for r in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
