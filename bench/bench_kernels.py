"""Benchmark of ``kernels.rejection_sample`` on a GPU (issue 3's table).

For each shape: median time (CUDA events via ``triton.testing.do_bench``, L2 flushed), effective
bandwidth as a fraction of the measured device-to-device copy bandwidth (counting one read of every
logit row, and the reads the algorithm cannot avoid: block verification with draft logits re-reads
target rows 0..g-1 and all draft rows), the time of the same call with host draft lengths (no sync),
the time of a CUDA-graph replay (``kernels.capture_verify``, checked equal to the direct call), the
speed-up over ``bench/torch_eager.py``, the host (CPU) time of one no-sync call and the wall time of
one default call back to back (it syncs inside). Ends with a
summary of the issue-3 targets and the peak-memory check of a 512 x 8 x 262144 call.
Usage: ``PYTHONPATH=. python3 bench/bench_kernels.py [--quick] [--requests 128 512] ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import signal
import statistics
import sys

import torch

import kernels
from bench.torch_eager import rejection_sample_eager

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


def add_grid_args(p: argparse.ArgumentParser) -> None:
    """The shape grid's options (issue 3's grid by default); ``apply_quick`` applies ``--quick``."""
    p.add_argument("--requests", type=int, nargs="+", default=[1, 16, 128, 512])
    p.add_argument("--draft-lens", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--vocabs", type=int, nargs="+", default=[32000, 128256, 151936, 262144])
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"], choices=sorted(DTYPES))
    p.add_argument("--methods", nargs="+", default=["token", "block"], choices=["token", "block"])
    p.add_argument("--drafts", nargs="+", default=["logits", "point"], choices=["logits", "point"])
    p.add_argument("--quick", action="store_true", help="requests 1/128/512, k 1/8, V 32000/262144")


def apply_quick(args: argparse.Namespace) -> argparse.Namespace:
    if args.quick:
        args.requests, args.draft_lens, args.vocabs = [1, 128, 512], [1, 8], [32000, 262144]
    return args


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_grid_args(p)
    p.add_argument("--no-eager", action="store_true")
    p.add_argument("--rep", type=int, default=60, help="do_bench rep (ms)")
    p.add_argument("--skip-memory", action="store_true")
    p.add_argument("--stages", action="store_true", help="also time each launch of the pipeline")
    p.add_argument("--sweep", action="store_true", help="only sweep pass-1 / race block sizes and warps")
    p.add_argument("--race-sweep", action="store_true",
                   help="only sweep the race's block size, warps and register cap (pass 1 at its default)")
    p.add_argument("--logit-scale", type=float, default=1.0,
                   help="multiply the standard-normal logits (e.g. 30: near-one-hot vocabulary blocks)")
    p.add_argument("--draft-data", default="uniform", choices=DRAFT_DATA,
                   help="how drafts relate to the target (make_inputs): the share of block "
                        "verification's second pass that runs depends on it")
    p.add_argument("--greedy", type=float, default=0.0,
                   help="share of greedy requests (make_inputs; with --draft-data close their drafts "
                        "are the argmax, all accepted)")
    p.add_argument("--registers", action="store_true",
                   help="end with the registers and spills of every compiled kernel variant")
    return apply_quick(p.parse_args(argv))


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s (2 GiB buffers, read + write counted)."""
    import triton.testing

    src = torch.empty(2**31, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    return 2 * 2**31 / (ms * 1e-3)


DRAFT_DATA = ("uniform", "close", "every-mass")


def make_inputs(reqs, k, vocab, dtype, with_draft, gen, scale=1.0, data="uniform", greedy=0.0):
    """Standard-normal logits times ``scale`` (temperatures in [0.5, 1.5)) on ``gen``'s device.

    ``greedy``: the share of requests made greedy (temperature 0), spread evenly (0.1: every tenth,
    1: all). Their drafts stay as drawn, except under ``data="close"``, where a greedy request's
    draft ids are its target rows' argmax: every draft accepted, the most argmax reading decide
    does (kernels/decide.py). The other requests and all random draws are the same as without.

    ``data`` picks the drafts, which decide how much of block verification's second pass runs
    (kernels/decide.py skips the slots whose ``Z`` cannot change the decision):

    - ``uniform``: independent target and draft logits, draft ids uniform (the grid's data, as
      before v20, the same draws);
    - ``close``: draft logits = target logits + 0.5 x standard normal, ids sampled from the draft
      (point drafts: from the target): a good draft model, most slots accepted;
    - ``every-mass``: independent logits, ids maximising ``b / q`` on every slot but the last and
      minimising it there, so ``p_i = 1`` before the last slot and every ``Z`` is needed: the worst
      case of the skip (point drafts: as ``uniform``).
    """
    dev = gen.device
    if data not in DRAFT_DATA:
        raise ValueError(f"data={data!r}: expected one of {DRAFT_DATA}")
    rows = torch.arange(reqs * k, device=dev)
    target_row = rows + rows // max(k, 1)  # target row j of request r sits at r * (k + 1) + j
    # Drawn in the order of the uniform data before v20: target, draft, ids, temperatures.
    target = torch.randn(reqs * (k + 1), vocab, device=dev, generator=gen) * scale
    draft = None
    if with_draft:
        draft = torch.randn(reqs * k, vocab, device=dev, generator=gen) * scale
        if data == "close":
            draft = target[target_row] + 0.5 * draft
    ids = torch.randint(0, vocab, (reqs * k,), device=dev, generator=gen)
    temperature = torch.rand(reqs, device=dev, generator=gen) + 0.5
    if data == "close" and k:
        source = draft if with_draft else target[target_row]
        t = temperature.repeat_interleave(k)[:, None]
        ids = torch.multinomial(torch.softmax(source.to(dtype).float() / t, dim=1), 1, generator=gen)[:, 0]
    if data == "every-mass" and with_draft and k:
        gap = target[target_row].to(dtype).float() - draft.to(dtype).float()
        last = (rows % k) == k - 1
        ids = torch.where(last, gap.argmin(dim=1), gap.argmax(dim=1))
    if not 0.0 <= greedy <= 1.0:
        raise ValueError(f"greedy={greedy!r}: expected a share in [0, 1]")
    if greedy:
        r = torch.arange(reqs, device=dev)
        is_greedy = torch.floor((r + 1) * greedy) > torch.floor(r * greedy)
        temperature = torch.where(is_greedy, 0.0, temperature)
        if data == "close" and k:
            best = target[target_row].to(dtype).float().argmax(dim=1)  # the lowest index of the max
            ids = torch.where(is_greedy.repeat_interleave(k), best, ids)
    return dict(
        target_logits=target.to(dtype), draft_logits=None if draft is None else draft.to(dtype),
        draft_token_ids=ids,
        cu_num_draft_tokens=(torch.arange(reqs + 1, device=dev) * k).to(torch.int32),
        temperature=temperature,
        seeds=torch.arange(reqs, device=dev, dtype=torch.int64),
        positions=torch.arange(reqs, device=dev, dtype=torch.int64) * 1000,
    )


def host_time_us(fn, calls: int = 20) -> float:
    """CPU time of one call (launches only, no sync inside), averaged; the GPU is drained first."""
    import time

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


# ``rejection_sample``'s positional arguments, in order, as ``make_inputs`` names them
CALL_ARGS = ("target_logits", "draft_logits", "draft_token_ids", "cu_num_draft_tokens", "temperature",
             "seeds", "positions")


def call_args(batch) -> list:
    """``make_inputs``' batch as ``rejection_sample``'s positional arguments."""
    return [batch[name] for name in CALL_ARGS]


def bench_one(args, reqs, k, vocab, dtype_name, method, draft_kind, copy_bw, gen):
    import triton.testing

    dtype = DTYPES[dtype_name]
    batch = make_inputs(reqs, k, vocab, dtype, draft_kind == "logits", gen, args.logit_scale, args.draft_data,
                        args.greedy)
    batch_args = call_args(batch)
    lengths = [k] * reqs
    run = lambda: kernels.rejection_sample(*batch_args, method=method)
    run_nosync = lambda: kernels.rejection_sample(*batch_args, method=method, draft_lengths=lengths)
    run()  # compile
    run_nosync()
    ms = triton.testing.do_bench(run, warmup=10, rep=args.rep, return_mode="median")
    ms_nosync = triton.testing.do_bench(run_nosync, warmup=10, rep=args.rep, return_mode="median")
    host_us = host_time_us(run_nosync)
    host_default_us = host_time_us(run)  # it syncs inside: the back-to-back wall time of a default call
    captured = kernels.capture_verify(*batch_args, method=method, draft_lengths=lengths)
    ms_graph = triton.testing.do_bench(captured.replay, warmup=10, rep=args.rep, return_mode="median")
    replayed = captured.replay()
    direct = kernels.rejection_sample(*batch_args, method=method)
    graph_ok = all(torch.equal(a, b) for a, b in zip(replayed[:2], direct[:2], strict=True))
    del captured
    elem = batch["target_logits"].element_size()
    rows = reqs * (k + 1) + (reqs * k if draft_kind == "logits" else 0)
    one_read = rows * vocab * elem
    second = 2 * reqs * k * vocab * elem if (method == "block" and draft_kind == "logits") else 0
    best = ms * 1e-3  # the default path (host checks and sync included)
    eager_ratio = float("nan")
    if not args.no_eager:
        try:
            eager = lambda: rejection_sample_eager(*batch_args, method=method)
            eager()
            ms_eager = triton.testing.do_bench(eager, warmup=3, rep=args.rep, return_mode="median")
            eager_ratio = ms_eager / ms
        except torch.cuda.OutOfMemoryError:
            eager_ratio = float("nan")
        torch.cuda.empty_cache()
    if args.stages:
        stage_times(batch, lengths, method)
    pct1, pct_alg = 100 * one_read / best / copy_bw, 100 * (one_read + second) / best / copy_bw
    print(f"{reqs:5d} {k:2d} {vocab:7d} {dtype_name:5s} {method:6s} {draft_kind:7s} "
          f"{ms * 1e3:10.1f} {ms_nosync * 1e3:10.1f} {ms_graph * 1e3:9.1f} {pct1:7.1f} "
          f"{pct_alg:7.1f} {eager_ratio:8.1f} {host_us:8.1f} {host_default_us:8.1f}"
          f"{'' if graph_ok else '  GRAPH MISMATCH'}",
          flush=True)
    return dict(reqs=reqs, k=k, vocab=vocab, dtype=dtype_name, method=method, draft=draft_kind, us=ms * 1e3,
                us_nosync=ms_nosync * 1e3, us_graph=ms_graph * 1e3, pct1=pct1, pct_alg=pct_alg,
                eager=eager_ratio, host_us=host_us, host_default_us=host_default_us, graph_ok=graph_ok)


def summarise(rows) -> None:
    """The issue-3 targets, computed from the table (default path)."""
    if not rows:
        return
    big = [r for r in rows if r["reqs"] >= 128]
    token = [r for r in big if r["method"] == "token"]
    block = [r for r in big if r["method"] == "block"]
    print("\nsummary (>= 128 requests; the default path unless labelled):")
    paths = (("", "us"), (" no-sync", "us_nosync"), (" graph", "us_graph"))
    for name, group, key in (("token %1read", token, "pct1"), ("block %alg", block, "pct_alg")):
        for dtype in sorted({r["dtype"] for r in group}):
            for label, time_key in paths:  # the same bytes over the other paths' times
                vals = sorted(r[key] * r["us"] / r[time_key] for r in group if r["dtype"] == dtype)
                if vals:
                    print(f"  {name} {dtype}{label}: min {vals[0]:.1f}  median {statistics.median(vals):.1f}"
                          f"  max {vals[-1]:.1f}  (>= 70%: {sum(v >= 70 for v in vals)}/{len(vals)})")
    eager = [r["eager"] for r in big if r["eager"] == r["eager"]]
    if eager:
        print(f"  x_eager: min {min(eager):.1f}  (>= 10x: {sum(e >= 10 for e in eager)}/{len(eager)})")
    single = [r for r in rows if r["reqs"] == 1]
    for key in ("us", "us_nosync", "us_graph", "host_us", "host_default_us"):
        if single:
            vals = sorted(r[key] for r in single)
            middle = statistics.median(vals)
            print(f"  single request {key}: {vals[0]:.1f} .. {vals[-1]:.1f} us (median {middle:.1f})")
    if single:
        print("  (do_bench clears L2 with a memset the host can enqueue behind, so event times of\n"
              "   host-bound no-sync calls understate back-to-back cost; host_us bounds it;\n"
              "   host_default_us is the back-to-back wall time of a default call, which syncs)")
    if big:
        print(f"  lowest %alg at >= 128 requests: {min(big, key=lambda r: r['pct_alg'])}")
    print(f"  graph replay == direct call: {sum(r['graph_ok'] for r in rows)}/{len(rows)}")


@contextlib.contextmanager
def tuning_overrides(values: dict):
    """Set module constants of ``kernels/`` for a sweep or an A/B: ``NAME`` is ``kernels.tuning``'s
    (``BLOCK_V``, ``RACE_WARPS``, ...), ``module.NAME`` another module's (``call_plan.ENABLED``).
    Drops the geometries, workspaces and call plans derived from them; restores them on exit."""
    import importlib

    from kernels import release_workspaces, tuning

    targets = {}
    for key in values:
        module, _, name = key.rpartition(".")
        targets[key] = (importlib.import_module(f"kernels.{module or 'tuning'}"), name)
    before = {key: getattr(*target) for key, target in targets.items()}

    def apply(settings):
        for key, value in settings.items():
            setattr(*targets[key], value)
        tuning.geometry.cache_clear()
        release_workspaces()

    try:
        apply(values)
        yield
    finally:
        apply(before)


def sweep_stages(args, label: str, configs) -> None:
    """Token stage times (``stage_times``) of every requested shape under each ``(description, values)``
    of ``configs`` (``tuning_overrides``)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    shapes = itertools.product(args.requests, args.draft_lens, args.vocabs, args.dtypes)
    for reqs, k, vocab, dtype_name in shapes:
        batch = make_inputs(reqs, k, vocab, DTYPES[dtype_name], True, gen)
        for description, values in configs:
            with tuning_overrides(values):
                print(f"{label} {reqs}x{k}x{vocab} {dtype_name} {description}:", end="", flush=True)
                stage_times(batch, [k] * reqs, "token")
        del batch
        torch.cuda.empty_cache()


def sweep(args):
    """Pass-1 block sizes and warps; at the default pass 1 (8192 x 8) also four race variants."""
    configs = []
    for block, warps in itertools.product((4096, 8192, 16384), (4, 8, 16)):
        races = ((4096, 8), (2048, 4), (4096, 4), (8192, 8)) if (block, warps) == (8192, 8) else ((4096, 8),)
        for race_block, race_warps in races:
            configs.append((f"block {block} warps {warps} race {race_block}/{race_warps}",
                            {"BLOCK_V": block, "STATS_WARPS": warps, "RACE_BLOCK_V": race_block,
                             "RACE_WARPS": race_warps}))
    sweep_stages(args, "sweep", configs)


RACE_SWEEP = ((4096, 8, 64), (4096, 8, 80), (8192, 8, 64), (8192, 8, 80), (4096, 4, 64), (2048, 4, 80),
              (8192, 16, 64), (16384, 16, 64))


def race_sweep(args):
    """The unpruned race's (block, warps, register cap of blocks >= 1024 lanes) of ``RACE_SWEEP``, pass 1
    at its default."""
    configs = [(f"race {block}/{warps} maxnreg {cap}",
                {"RACE_BLOCK_V": block, "RACE_WARPS": warps, "RACE_MAXNREG": cap})
               for block, warps, cap in RACE_SWEEP]
    sweep_stages(args, "race sweep", configs)


def stage_times(batch, lengths, method, verbose=True):
    """Median time (us) of each launch on its own (the workspace of a single chunk is reused), printed
    and returned by stage name."""
    import triton
    import triton.testing

    from kernels import tuning
    from kernels.chunking import Workspace
    from kernels.decide import launch_decide
    from kernels.driver import ChunkTensors
    from kernels.residual_mass import launch_residual_mass
    from kernels.residual_sample import launch_residual_sample
    from kernels.row_stats import RACE_BEST_UNSET, launch_row_stats

    reqs, width = len(lengths), max(lengths) + 1
    vocab = batch["target_logits"].shape[1]
    block_v = tuning.BLOCK_V
    nvb = triton.cdiv(vocab, block_v)
    nvb2, rows2 = max(64, triton.next_power_of_2(nvb)), max(16, triton.next_power_of_2(width))
    chunk = ChunkTensors(batch["target_logits"], batch["draft_logits"], batch["draft_token_ids"],
                         batch["cu_num_draft_tokens"], batch["temperature"], batch["seeds"],
                         batch["positions"],
                         torch.empty((reqs, width), dtype=torch.int64, device="cuda"),
                         torch.empty(reqs, dtype=torch.int32, device="cuda"), None)
    has_draft = chunk.draft_logits is not None
    d = sum(lengths)
    race_block = tuning.race_block_size(reqs, vocab, tuning.RACE_BLOCK_V)
    race_blocks = triton.cdiv(vocab, race_block)
    ws = Workspace.allocate(d + reqs, d, reqs, nvb, race_blocks, "cuda")
    common = dict(block_method=method == "block", has_draft=has_draft, want_logprobs=False, rows=rows2,
                  nvb_pow2=nvb2)
    stages = {
        "stats": lambda: launch_row_stats(ws, chunk.target_logits, chunk.draft_logits, chunk.cu,
                                          chunk.temperature, reqs, block_v),
        "decide": lambda: launch_decide(ws, chunk, reqs, combine=True, decide=True, **common),
        "race+emit": lambda: launch_residual_sample(ws, chunk, reqs, has_draft=has_draft, want_logprobs=False,
                                                    race_block=race_block, race_blocks=race_blocks,
                                                    nvb_pow2=max(64, triton.next_power_of_2(race_blocks)),
                                                    prune=tuning.race_prune(reqs * vocab)),
    }
    if method == "block" and has_draft:
        stages["mass"] = lambda: launch_residual_mass(ws, chunk, reqs, block_v)
    # Repeated races need their per-request block counters zeroed and their proven scores reset (the
    # row table does both once per call), or the last-block combine and emit never run again and a
    # pruned race would prune with the last call's bound; the reset's own time is subtracted.
    race = stages["race+emit"]

    def reset():
        ws.done[: 2 * reqs].zero_()
        ws.done[2 * reqs: 3 * reqs].fill_(RACE_BEST_UNSET.value)

    stages["race+emit"] = lambda: (reset(), race())
    reset_ms = triton.testing.do_bench(reset, warmup=5, rep=20, return_mode="median")
    parts, times = [], {}
    for name, fn in stages.items():
        if name == "race+emit" and "mass" in stages:
            # the race reads tau and log p_tau: give it block verification's real two-stage decision
            # (the "decide" stage above decides without the residual masses of pass 2)
            launch_decide(ws, chunk, reqs, combine=True, decide=False, **common)
            stages["mass"]()
            launch_decide(ws, chunk, reqs, combine=False, decide=True, **common)
        fn()
        ms = triton.testing.do_bench(fn, warmup=5, rep=20, return_mode="median")
        times[name] = (ms - (reset_ms if name == 'race+emit' else 0.0)) * 1e3
        parts.append(f"{name} {times[name]:.1f}")
    if verbose:
        print("    stages (us): " + ", ".join(parts), flush=True)
    return times


def peak_memory(copy_bw):
    reqs, k, vocab = 512, 8, 262144
    gen = torch.Generator(device="cuda").manual_seed(0)
    for dtype_name in ("bf16", "fp32"):
        batch = make_inputs(reqs, k, vocab, DTYPES[dtype_name], True, gen)
        logits = (batch["target_logits"], batch["draft_logits"])
        input_bytes = sum(t.numel() * t.element_size() for t in logits)
        for budget in (1 << 30, 1 << 24):
            kernels.release_workspaces()  # a kept workspace would hide the call's own allocation
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            out = kernels.rejection_sample(*batch.values(), method="block", max_chunk_bytes=budget,
                                           want_logprobs=True)
            torch.cuda.synchronize()
            extra = torch.cuda.max_memory_allocated() - base
            limit = budget + 0.05 * input_bytes
            print(f"peak memory 512x8x262144 {dtype_name} budget {budget >> 20} MiB: "
                  f"extra {extra / 2**20:.1f} MiB (limit {limit / 2**20:.0f} MiB) "
                  f"{'OK' if extra <= limit else 'OVER'}", flush=True)
            del out
        del batch
        torch.cuda.empty_cache()


def main(argv=None):
    args = parse_args(argv)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    copy_bw = copy_bandwidth()
    print(f"device-to-device copy bandwidth: {copy_bw / 1e9:.0f} GB/s", flush=True)
    print(f"{'reqs':>5} {'k':>2} {'V':>7} {'dtype':5s} {'method':6s} {'draft':7s} {'us':>10} "
          f"{'us_nosync':>10} {'us_graph':>9} {'%1read':>7} {'%alg':>7} {'x_eager':>8} {'host_us':>8} "
          f"{'host_def':>8}",
          flush=True)
    if args.race_sweep:
        race_sweep(args)
        return
    if args.sweep:
        return sweep(args)
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    # A time limit (``timeout``'s SIGTERM) still prints the summary of the shapes measured so far.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for reqs, k, vocab, dtype_name, method, draft_kind in itertools.product(
                args.requests, args.draft_lens, args.vocabs, args.dtypes, args.methods, args.drafts):
            try:
                rows.append(bench_one(args, reqs, k, vocab, dtype_name, method, draft_kind, copy_bw, gen))
            except torch.cuda.OutOfMemoryError as exc:  # pragma: no cover - reported, not fatal
                print(f"{reqs} {k} {vocab} {dtype_name} {method} {draft_kind}: OOM {exc}", flush=True)
            torch.cuda.empty_cache()
    except KeyboardInterrupt:
        print(f"stopped by the time limit after {len(rows)} shapes", flush=True)
        summarise(rows)
        return 1
    summarise(rows)
    if not args.skip_memory:
        peak_memory(copy_bw)
    if args.registers:
        print_registers()


def print_registers():
    """Registers and spills of every kernel variant compiled in this process."""
    from kernels import decide, residual_mass, residual_sample, row_stats

    launchers = {"pass 1": row_stats._row_stats_kernel, "pass 2": residual_mass._residual_mass_kernel,
                 "decide": decide._decide_kernel, "race": residual_sample._race_blocks_kernel}
    for name, launcher in launchers.items():
        for device_cache in getattr(launcher.fn, "device_caches", {}).values():
            for compiled in device_cache[0].values():
                print(f"{name} kernel variant: {compiled.n_regs} registers, {compiled.n_spills} spills")


if __name__ == "__main__":
    sys.exit(main())
