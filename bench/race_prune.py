"""The pruned race against the unpruned one on a GPU: the same outputs, and the time each takes.

Usage: ``PYTHONPATH=. python3 bench/race_prune.py [--requests 16 128 512] [--draft-lens 1 8]
[--vocabs ...] [--dtypes bf16 fp32] [--data uniform close] [--logit-scales 1 4]``.
For each shape and each of token verification with draft logits, with point drafts and block
verification with draft logits (``bench_kernels.make_inputs``: standard-normal logits times the
scale, temperatures in [0.5, 1.5)), it runs the no-sync call with the race never pruned and always
pruned (``tuning.RACE_PRUNE_MIN_ENTRIES``), compares ids, counts and logprobs bit for bit, and times
(CUDA events, medians) the whole no-sync call and the race launch alone (``bench_kernels.stage_times``)
both ways, alternating.
"""

from __future__ import annotations

import argparse
import itertools

import torch
import triton
import triton.testing

import kernels
from bench.bench_kernels import DRAFT_DATA, DTYPES, call_args, make_inputs, stage_times, tuning_overrides

KINDS = (("token", "logits"), ("token", "point"), ("block", "logits"))
PRUNE_SETTINGS = {"0": {"RACE_PRUNE_MIN_ENTRIES": 1 << 62}, "1": {"RACE_PRUNE_MIN_ENTRIES": 0}}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, nargs="+", default=[16, 128, 512])
    p.add_argument("--draft-lens", type=int, nargs="+", default=[1, 8])
    p.add_argument("--vocabs", type=int, nargs="+", default=[32000, 128256, 262144])
    p.add_argument("--dtypes", nargs="+", default=["bf16"], choices=sorted(DTYPES))
    p.add_argument("--data", nargs="+", default=["uniform"], choices=DRAFT_DATA)
    p.add_argument("--logit-scales", type=float, nargs="+", default=[1.0])
    p.add_argument("--rep", type=int, default=25, help="do_bench rep (ms)")
    return p.parse_args(argv)


def median_us(fn, rep):
    return 1e3 * triton.testing.do_bench(fn, warmup=5, rep=rep, return_mode="median")


def main(argv=None):
    args = parse_args(argv)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    print("reqs  k       V dtype method draft  data     scale  same   call_off  call_on  ratio   race_off"
          "  race_on  ratio", flush=True)
    rows, differ = [], 0
    grid = itertools.product(args.requests, args.draft_lens, args.vocabs, args.dtypes, args.data,
                             args.logit_scales)
    for reqs, k, vocab, dtype_name, data, scale in grid:
        for method, draft in KINDS:
            batch = make_inputs(reqs, k, vocab, DTYPES[dtype_name], draft == "logits", gen, scale, data)
            batch_args = call_args(batch)
            lengths = [k] * reqs
            def run(batch_args=batch_args, method=method, lengths=lengths):
                return kernels.rejection_sample(*batch_args, method=method, draft_lengths=lengths,
                                                want_logprobs=True)

            outs, call_us, race_us = {}, {"0": [], "1": []}, {}
            for setting in ("0", "1"):
                with tuning_overrides(PRUNE_SETTINGS[setting]):
                    outs[setting] = run()
            same = all(torch.equal(a, b) for a, b in zip(outs["0"], outs["1"], strict=True))
            differ += not same
            for _ in range(2):  # alternate the two settings, twice each
                for setting in ("0", "1"):
                    with tuning_overrides(PRUNE_SETTINGS[setting]):
                        call_us[setting].append(median_us(run, args.rep))
            for setting in ("0", "1"):
                with tuning_overrides(PRUNE_SETTINGS[setting]):
                    race_us[setting] = stage_times(batch, lengths, method, verbose=False)["race+emit"]
            off, on = min(call_us["0"]), min(call_us["1"])
            row = dict(reqs=reqs, k=k, vocab=vocab, dtype=dtype_name, method=method, draft=draft, data=data,
                       scale=scale, same=same, call_off=off, call_on=on, race_off=race_us["0"],
                       race_on=race_us["1"])
            rows.append(row)
            print(f"{reqs:4d} {k:2d} {vocab:7d} {dtype_name:5s} {method:6s} {draft:6s} {data:8s} "
                  f"{scale:5.1f}  {'yes' if same else 'NO ':4s} {off:9.1f} {on:8.1f} {on / off:6.3f} "
                  f"{race_us['0']:9.1f} {race_us['1']:8.1f} {race_us['1'] / race_us['0']:6.3f}", flush=True)
            del batch, batch_args, outs
            torch.cuda.empty_cache()
    ratios = sorted(r["race_on"] / r["race_off"] for r in rows)
    calls = sorted(r["call_on"] / r["call_off"] for r in rows)
    print(f"\noutputs identical on {len(rows) - differ} of {len(rows)} shapes")
    print(f"race time on/off: median {ratios[len(ratios) // 2]:.3f}, range {ratios[0]:.3f}-{ratios[-1]:.3f}")
    print(f"call time on/off: median {calls[len(calls) // 2]:.3f}, range {calls[0]:.3f}-{calls[-1]:.3f}")


if __name__ == "__main__":
    main()
