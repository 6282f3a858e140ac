"""Block verification with draft logits per draft data: time, share of pass-2 rows computed, and
outputs kept for a bit-for-bit comparison with another tree (v20's residual-mass skip).

Usage (GPU machine):
  ``PYTHONPATH=. python3 bench/block_mass_skip.py run DIR`` times every shape x data set (no-sync
  call and graph replay, CUDA events) and saves each output to ``DIR``; run it again with
  ``PYTHONPATH`` pointing at another checkout (``git archive REV | tar -x -C old``) and another
  ``DIR``, then ``python3 bench/block_mass_skip.py compare OLD_DIR NEW_DIR`` prints whether every
  output is equal and the time ratios. Inputs come from this file's checkout of
  ``bench/bench_kernels.make_inputs`` whichever ``kernels`` package is imported.

The printed ``wanted`` share replays decide's skip test (kernels/decide.py) in float32 torch from the
same inputs and uniforms; it is an estimate of the rows pass 2 reads, not read from the kernels.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(1, 8, 32000, "bf16"), (16, 8, 128256, "bf16"), (128, 8, 32000, "bf16"),
          (128, 4, 128256, "bf16"), (128, 8, 151936, "bf16"), (512, 4, 32000, "bf16"),
          (512, 8, 32000, "bf16"), (512, 4, 151936, "bf16"), (512, 4, 262144, "bf16"),
          (128, 4, 32000, "fp32"), (512, 1, 262144, "fp32"), (128, 8, 128256, "fp32")]
MARGIN = 2.0**-7  # kernels.decide.MASS_SKIP_MARGIN (not imported: the other tree may not have it)


def _inputs_module():
    path = os.path.join(HERE, "bench_kernels.py")
    spec = importlib.util.spec_from_file_location("specfuzz_bench_inputs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wanted_share(kernels, batch, call_args, reqs, k) -> float:
    """Share of draft slots whose ``Z`` the skip keeps (float32 torch replay of the COMBINE test)."""
    if k < 2:
        return 0.0
    temperature = batch["temperature"].repeat_interleave(k)[:, None]
    rows = torch.arange(reqs * k, device="cuda")
    ids = batch["draft_token_ids"][:, None]
    target = batch["target_logits"][rows + rows // k].float()
    log_b = torch.log_softmax(target / temperature, 1).gather(1, ids)
    log_q = torch.log_softmax(batch["draft_logits"].float() / temperature, 1).gather(1, ids)
    eta = kernels.random_draws(*call_args)[0].view(reqs, k).float()
    log_b, log_q = log_b.view(reqs, k), log_q.view(reqs, k)
    log_p = torch.zeros(reqs, device="cuda")
    wanted = torch.zeros(reqs, k, dtype=torch.bool, device="cuda")
    for s in range(k):
        if s >= 1:
            wanted[:, s] = ~(torch.log(eta[:, s - 1]) > log_p + MARGIN)
        log_p = torch.clamp(log_p + log_b[:, s] - log_q[:, s], max=0.0)
    wanted &= ~(torch.log(eta[:, k - 1]) + MARGIN < log_p)[:, None]
    return wanted.float().mean().item()


def _time_block_call(kernels, call_args, lengths, rep):
    """``(ids, num_emitted, no-sync us, graph-replay us)`` of one block call (medians, CUDA events)."""
    import triton.testing

    def call():
        return kernels.rejection_sample(*call_args, method="block", draft_lengths=lengths)

    ids, num, _ = call()
    us = 1e3 * triton.testing.do_bench(call, warmup=10, rep=rep, return_mode="median")
    captured = kernels.capture_verify(*call_args, method="block", draft_lengths=lengths)
    graph_us = 1e3 * triton.testing.do_bench(captured.replay, warmup=10, rep=rep, return_mode="median")
    return ids, num, us, graph_us


def run(out_dir: str, rep: int = 25) -> None:
    import triton

    import kernels

    inputs = _inputs_module()
    os.makedirs(out_dir, exist_ok=True)
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__} "
          f"kernels from {kernels.__file__}", flush=True)
    rows = []
    for reqs, k, vocab, dtype_name in SHAPES:
        for data in inputs.DRAFT_DATA:
            gen = torch.Generator(device="cuda").manual_seed(reqs * 7 + k * 131 + vocab)
            batch = inputs.make_inputs(reqs, k, vocab, inputs.DTYPES[dtype_name], True, gen, 1.0, data)
            call_args = inputs.call_args(batch)
            ids, num, us, graph_us = _time_block_call(kernels, call_args, [k] * reqs, rep)
            name = f"{reqs}x{k}x{vocab}{dtype_name}-{data}"
            torch.save({"ids": ids.cpu(), "num": num.cpu()}, os.path.join(out_dir, name + ".pt"))
            share = wanted_share(kernels, batch, call_args, reqs, k)
            row = dict(reqs=reqs, k=k, vocab=vocab, dtype=dtype_name, data=data, us=us, graph_us=graph_us,
                       wanted=share, mean_emitted=num.float().mean().item())
            rows.append(row)
            print(f"{reqs:4d} x {k} x {vocab:6d} {dtype_name} {data:10s} no-sync {us:8.1f} us  graph "
                  f"{graph_us:8.1f} us  wanted {share:.3f}  emitted {row['mean_emitted']:.2f}", flush=True)
            torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "times.json"), "w") as f:
        json.dump(rows, f, indent=1)


def compare(old_dir: str, new_dir: str) -> int:
    equal = different = 0
    for path in sorted(glob.glob(os.path.join(old_dir, "*.pt"))):
        other = os.path.join(new_dir, os.path.basename(path))
        if not os.path.exists(other):
            continue
        a, b = torch.load(path), torch.load(other)
        same = torch.equal(a["ids"], b["ids"]) and torch.equal(a["num"], b["num"])
        equal += same
        different += not same
        if not same:
            print("DIFFERENT", os.path.basename(path))
    print(f"outputs equal: {equal}, different: {different}")
    key = lambda r: (r["reqs"], r["k"], r["vocab"], r["dtype"], r["data"])
    with open(os.path.join(old_dir, "times.json")) as f:
        old = {key(r): r for r in json.load(f)}
    with open(os.path.join(new_dir, "times.json")) as f:
        new = [r for r in json.load(f) if key(r) in old]
    print("shape                  data        no-sync old / new (ratio)   graph old / new (ratio)   wanted")
    for r in new:
        o = old[key(r)]
        print(f"{r['reqs']:4d} x {r['k']} x {r['vocab']:6d} {r['dtype']} {r['data']:10s} {o['us']:8.1f} / "
              f"{r['us']:8.1f} ({r['us'] / o['us']:.3f})  {o['graph_us']:8.1f} / {r['graph_us']:8.1f} "
              f"({r['graph_us'] / o['graph_us']:.3f})  {r['wanted']:.3f}")
    return 1 if different else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
