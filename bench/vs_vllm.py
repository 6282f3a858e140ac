"""Our kernels against vLLM's MRV2 ``rejection_sample`` (0.33.0 or 0.34.0, whichever is importable),
side by side in one process (issue 36).

Usage on a GPU machine (carry ``.whl`` and ``.vllm`` as for ``bench/vllm_gpu_check.sh``; the first
line installs vLLM's Python code once per machine, as that script does)::

    [ -d /tmp/vllm-0.34.0/vllm ] || { python3 -m pip install -q --no-index --no-deps --no-compile \
        --target /tmp/site .whl/*.whl && mkdir -p /tmp/vllm-0.34.0 && \
        tar -xzf .vllm/vllm-0.34.0-py.tar.gz -C /tmp/vllm-0.34.0; }
    export PYTHONPATH=.:/tmp/vllm-0.34.0:/tmp/site
    python3 bench/vs_vllm.py --json $OUT/vs_vllm.json
    timeout 570 python3 bench/vs_vllm.py --requests 128 512 --json $OUT/big.json
    PYTHONPATH=. python3 bench/vs_vllm.py --from-json small.json big.json  # the tables of parts, merged
    PYTHONPATH=. python3 bench/vs_vllm.py --smoke  # no GPU: the plumbing on tiny shapes (interpreter)

A run longer than a machine's time limit is best split by ``--requests`` into parts (a cold Triton
cache adds minutes of compiles to the first); ``--from-json`` prints the merged tables and verdicts.

Grid (options override it; ``--quick``: requests 1/128/512, k 1/8, V 32000/262144): requests
{1, 16, 128, 512} x drafts per request k {1, 4, 8} x V {32000, 128256, 151936, 262144} x bf16 / fp32
x method token / block x drafts ``logits`` (draft logits) / ``point`` (point-mass drafts). Each
shape's inputs are ``bench_kernels.make_inputs``' (standard-normal logits, temperatures in
[0.5, 1.5), every request k drafts), and both kernels read the same tensors.

What is timed (CUDA events, ``triton.testing.do_bench``, which flushes L2 before each repetition;
the median):

- ours: one ``kernels.rejection_sample(...)`` call with ``draft_lengths`` given (no value-check
  sync), on the raw logits in their own dtype. Everything it does is inside: its host-side metadata
  checks, the temperatures, its chunking (default 1 GiB workspace budget), every launch.
- vLLM: its ``rejection_sample(*args, **kwargs)`` call alone: its six launches and its per-call
  allocations. ``args`` are built once per shape, before timing, by
  ``harness.adapters.vllm.MRV2Arguments``, exactly as the adapter maps a ``VerifyBatch``: the slot
  and row metadata, the ``[R + 1, k, V]`` draft-logit buffer, and what vLLM's ``Sampler`` does to
  the target rows before the verifier: a float32 copy divided by the temperatures
  (``apply_temperature``; no temperature here is 0 or 1). NOT inside vLLM's time: that copy and
  division (in serving one more read and a float32 write of the target rows), the metadata, and its
  serving wrapper's chunking (one call over the whole batch here, where serving would split the
  float32 target rows into 1 GiB chunks: more launches, never fewer).

So the fp32 rows are the like-for-like comparison: both kernels read the same float32 bytes, and
vLLM's temperature division is not charged to it. In bf16 rows ours reads bf16 while vLLM reads its
float32 copy (twice the bytes), made outside its time.

Per-shape columns: ``ours_us`` and ``vllm_us``; ``x_vllm`` = vLLM / ours (the speed-up);
``%ours`` and ``%vllm``: one read of the batch's logits (its target rows, and draft rows when it has
draft logits, in its dtype: the same bytes for both) over the time, as a share of the measured
device-to-device copy bandwidth; ``floor_us``: ``bench/floors.py``'s ``read + noise`` of the shape
(``floors.shape_floors``: one read of the rows the method must read, block verification's second
pass included, plus the race's noise; the floor of a design that samples after its reads, as ours
does); ``ours/fl`` and ``vllm/fl``: the times over it.

Targets of issue 36, judged in the summary: at >= 128 requests, every (method, drafts, dtype) group
at a median speed-up >= 1.5x and no shape below 1.2x, and every shape within 1.3x of its floor; a
single request at a median <= 40 us and a maximum <= 60 us over k for every V. The script reports,
it does not gate: exit 0 after a full run whatever the verdict, 1 when stopped early (SIGTERM, e.g.
``timeout``: the shapes measured so far are summarised and written), and 0 with one line saying why
when vLLM or CUDA is missing.

``--smoke`` runs three tiny shapes (1-2 requests x 2 drafts x V 64, float32, both methods, both
draft kinds) through both kernels on the default device (Triton's interpreter without CUDA), timed
by the wall clock: the times mean nothing, the floors and bandwidth shares are skipped, and the
group summaries cover every shape instead of those >= 128 requests. It checks the plumbing only.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import signal
import statistics
import sys
import time

import torch

import kernels
from bench.bench_kernels import DTYPES, add_grid_args, apply_quick, call_args, host_time_us, make_inputs
from harness.adapters import vllm as vllm_adapter
from harness.contract import VerifyBatch
from kernels._device import default_device

SCHEMA = "specfuzz-vs-vllm/1"
BIG_REQUESTS = 128  # the group, floor and worst-shape targets apply from here
SPEEDUP_MEDIAN, SPEEDUP_MIN = 1.5, 1.2
FLOOR_RATIO = 1.3
SINGLE_MEDIAN_US, SINGLE_MAX_US = 40.0, 60.0
SHAPE_KEYS = ("reqs", "k", "vocab", "dtype", "method", "draft")
SMOKE_SHAPES = (
    (2, 2, 64, "fp32", "token", "logits"),
    (2, 2, 64, "fp32", "block", "point"),
    (1, 2, 64, "fp32", "block", "logits"),
)
NO_CUDA = ("CUDA is not available (this benchmark times GPU kernels with CUDA events); run it on a GPU "
           "machine, or with --smoke for a CPU check of its plumbing")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_grid_args(p)
    p.add_argument("--rep", type=int, default=50, help="do_bench rep (ms) per kernel and shape")
    p.add_argument("--seed", type=int, default=0, help="seed of make_inputs' generator")
    p.add_argument("--no-floors", action="store_true", help="skip bench/floors.py's floors")
    p.add_argument("--worst", type=int, default=8, help="how many worst shapes to list")
    p.add_argument("--json", metavar="OUT", help="write every row (and the run's header) here")
    p.add_argument("--from-json", nargs="+", metavar="FILE",
                   help="measure nothing: print the tables and verdicts of earlier --json files, merged")
    p.add_argument("--smoke", action="store_true",
                   help="three tiny shapes on the default device (the interpreter without CUDA); "
                        "times meaningless")
    return apply_quick(p.parse_args(argv))


def grid(args) -> list[tuple]:
    """The shapes to measure, as ``SHAPE_KEYS`` tuples."""
    if args.smoke:
        return list(SMOKE_SHAPES)
    return list(itertools.product(args.requests, args.draft_lens, args.vocabs, args.dtypes, args.methods,
                                  args.drafts))


def one_read_bytes(reqs: int, k: int, vocab: int, dtype_name: str, draft: str) -> int:
    """One read of the batch's logits: target rows, and draft rows with draft logits, in its dtype."""
    rows = reqs * (k + 1) + (reqs * k if draft == "logits" else 0)
    return rows * vocab * DTYPES[dtype_name].itemsize


def event_timer(rep: int):
    """Median CUDA-event time (us) of a call, L2 flushed before each repetition."""
    import triton.testing

    return lambda fn: 1e3 * triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median")


def wall_timer(device: torch.device, calls: int = 1):
    """Median wall time (us) of ``calls`` calls, each synchronised; for --smoke, where it means nothing."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def timed(fn):
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        return 1e6 * statistics.median(times)

    return timed


def emitted_in_range(num: torch.Tensor, k: int) -> bool:
    return bool(((num >= 1) & (num <= k + 1)).all())


def time_both(shape, timer, gen, host_times: bool) -> dict:
    """Both kernels on one shape's inputs: their times (us) and whether their ``num_emitted`` is in
    ``[1, k + 1]`` (a check of the plumbing, not of the laws). The inputs live on ``gen``'s device;
    vLLM's arguments are built here, before either is timed; all of it is freed on return."""
    reqs, k, vocab, dtype_name, method, draft = shape
    inputs = make_inputs(reqs, k, vocab, DTYPES[dtype_name], draft == "logits", gen)
    ours_args, lengths = call_args(inputs), [k] * reqs
    theirs = vllm_adapter.mrv2_rejection_sample()
    mapped = vllm_adapter.MRV2Arguments(VerifyBatch(**inputs, method=method))
    vllm_args, vllm_kwargs = mapped.for_requests(0, reqs)

    def ours():
        return kernels.rejection_sample(*ours_args, method=method, draft_lengths=lengths)

    def vllm():
        return theirs(*vllm_args, **vllm_kwargs)

    ok = emitted_in_range(ours()[1], k) and emitted_in_range(vllm()[1], k)  # also the compiles
    out = dict(ours_us=timer(ours), vllm_us=timer(vllm), emitted_ok=ok)
    if host_times:  # back-to-back host cost of a call, which event times of tiny calls can hide
        out.update(ours_host_us=host_time_us(ours), vllm_host_us=host_time_us(vllm))
    return out


def shape_row(shape, times: dict, copy_bw: float | None, floor_parts: dict | None) -> dict:
    """One row of the table from a shape, ``time_both``'s result, the copy bandwidth (None: no
    shares) and ``floors.shape_floors``' parts (None: no floor ratios)."""
    reqs, k, vocab, dtype_name, method, draft = shape
    row = dict(zip(SHAPE_KEYS, shape, strict=True), **times)
    row["speedup"] = row["vllm_us"] / row["ours_us"]
    read = one_read_bytes(reqs, k, vocab, dtype_name, draft)
    for who in ("ours", "vllm"):
        row[f"pct_{who}"] = None if copy_bw is None else 100 * read / (row[f"{who}_us"] * 1e-6) / copy_bw
    row.update(floor_us=None, floor_read_us=None, floor_noise_us=None, ours_x_floor=None, vllm_x_floor=None)
    if floor_parts is not None:
        floor = floor_parts["after_reads"]
        row.update(floor_us=floor, floor_read_us=floor_parts["read"], floor_noise_us=floor_parts["noise"],
                   ours_x_floor=row["ours_us"] / floor, vllm_x_floor=row["vllm_us"] / floor)
    return row


def measure(shape, timer, gen, copy_bw: float | None, with_floors: bool) -> dict:
    """One shape measured: both kernels, then (GPU only) its floors, once the inputs are freed."""
    reqs, k, vocab, dtype_name, method, draft = shape
    times = time_both(shape, timer, gen, host_times=copy_bw is not None and reqs == 1)
    parts = None
    if with_floors:
        from bench import floors

        parts = floors.shape_floors(reqs, k, vocab, DTYPES[dtype_name], method, draft)
    return shape_row(shape, times, copy_bw, parts)


def _num(value, width: int, digits: int = 1) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}.{digits}f}"


TABLE_HEADER = (f"{'reqs':>5} {'k':>2} {'V':>7} {'dtype':5} {'method':6} {'draft':6} {'ours_us':>9} "
                f"{'vllm_us':>9} {'x_vllm':>7} {'%ours':>6} {'%vllm':>6} {'floor_us':>9} {'ours/fl':>7} "
                f"{'vllm/fl':>7}")


def table_line(row: dict) -> str:
    line = (f"{row['reqs']:5d} {row['k']:2d} {row['vocab']:7d} {row['dtype']:5} {row['method']:6} "
            f"{row['draft']:6} {row['ours_us']:9.1f} {row['vllm_us']:9.1f} {row['speedup']:6.2f}x "
            f"{_num(row['pct_ours'], 6)} {_num(row['pct_vllm'], 6)} {_num(row['floor_us'], 9)} "
            f"{_num(row['ours_x_floor'], 7, 2)} {_num(row['vllm_x_floor'], 7, 2)}")
    return line if row["emitted_ok"] else line + "  NUM_EMITTED OUT OF RANGE"




def _median(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else None


def group_summary(rows: list[dict], min_reqs: int) -> list[dict]:
    """Per (method, drafts, dtype) over the shapes with >= ``min_reqs`` requests: the speed-up's
    median and minimum with the issue-36 verdict, the median bandwidth shares and floor ratios."""
    groups = collections.defaultdict(list)
    for r in rows:
        if r["reqs"] >= min_reqs:
            groups[(r["method"], r["draft"], r["dtype"])].append(r)
    out = []
    for (method, draft, dtype), members in sorted(groups.items()):
        speedups = [r["speedup"] for r in members]
        median, low = statistics.median(speedups), min(speedups)
        out.append(dict(method=method, draft=draft, dtype=dtype, n=len(members), median_x=median, min_x=low,
                        pct_ours=_median(members, "pct_ours"), pct_vllm=_median(members, "pct_vllm"),
                        ours_x_floor=_median(members, "ours_x_floor"),
                        vllm_x_floor=_median(members, "vllm_x_floor"),
                        ok=median >= SPEEDUP_MEDIAN and low >= SPEEDUP_MIN))
    return out


def shape_name(r: dict) -> str:
    return f"{r['reqs']}x{r['k']}x{r['vocab']} {r['dtype']} {r['method']} {r['draft']}"


def _single(members: list[dict]) -> dict:
    ours, theirs = [r["ours_us"] for r in members], [r["vllm_us"] for r in members]
    median, top = statistics.median(ours), max(ours)
    return dict(n=len(members), ours_median=median, ours_max=top, vllm_median=statistics.median(theirs),
                vllm_max=max(theirs), ok=median <= SINGLE_MEDIAN_US and top <= SINGLE_MAX_US)


def single_summary(rows: list[dict]) -> list[dict]:
    """Per V over the single-request shapes: ours and vLLM median / max (us), and the target verdict."""
    by_vocab = collections.defaultdict(list)
    for r in rows:
        if r["reqs"] == 1:
            by_vocab[r["vocab"]].append(r)
    return [dict(vocab=vocab, **_single(members)) for vocab, members in sorted(by_vocab.items())]


def summarise(rows: list[dict], worst: int, smoke: bool) -> None:
    """The tables after the per-shape one: groups, worst shapes, single requests, the verdicts."""
    min_reqs = 1 if smoke else BIG_REQUESTS

    def _verdict(ok: bool) -> str:
        return "n/a" if smoke else ("PASS" if ok else "FAIL")

    scope = "every shape (--smoke)" if smoke else f">= {BIG_REQUESTS} requests"
    if smoke:
        print("\n--smoke: wall-clock times of tiny shapes on this device; they mean nothing about speed, "
              "the floors and bandwidth shares are skipped, and the groups cover every shape only to "
              "exercise the tables (verdicts n/a)")
    groups = group_summary(rows, min_reqs)
    print(f"\nper (method, drafts, dtype) at {scope}: speed-up over vLLM (target: median >= "
          f"{SPEEDUP_MEDIAN}x, no shape below {SPEEDUP_MIN}x); medians of %copy-bandwidth and time/floor")
    print(f"  {'method':6} {'drafts':6} {'dtype':5} {'n':>3} {'median_x':>8} {'min_x':>6} {'%ours':>6} "
          f"{'%vllm':>6} {'ours/fl':>7} {'vllm/fl':>7}  verdict")
    for g in groups:
        print(f"  {g['method']:6} {g['draft']:6} {g['dtype']:5} {g['n']:3d} {g['median_x']:7.2f}x "
              f"{g['min_x']:5.2f}x {_num(g['pct_ours'], 6)} {_num(g['pct_vllm'], 6)} "
              f"{_num(g['ours_x_floor'], 7, 2)} {_num(g['vllm_x_floor'], 7, 2)}  {_verdict(g['ok'])}")
    big = [r for r in rows if r["reqs"] >= min_reqs]
    print(f"\nworst shapes at {scope}, by speed-up over vLLM:")
    for r in sorted(big, key=lambda r: r["speedup"])[:worst]:
        print(f"  {shape_name(r)}: {r['speedup']:.2f}x (ours {r['ours_us']:.1f} us, "
              f"vLLM {r['vllm_us']:.1f} us)")
    with_floor = [r for r in big if r["ours_x_floor"] is not None]
    over = sorted((r for r in with_floor if r["ours_x_floor"] > FLOOR_RATIO),
                  key=lambda r: -r["ours_x_floor"])
    if with_floor:
        print(f"shapes over {FLOOR_RATIO}x their floor (read + noise), worst first: {len(over)} of "
              f"{len(with_floor)}")
        for r in over[:worst]:
            print(f"  {shape_name(r)}: {r['ours_x_floor']:.2f}x (ours {r['ours_us']:.1f} us, floor "
                  f"{r['floor_us']:.1f} = read {r['floor_read_us']:.1f} + noise {r['floor_noise_us']:.1f})")
    elif big:
        print("floors: not measured (--smoke or --no-floors)")
    singles = single_summary(rows)
    print(f"\nsingle request, over k and the other columns, per V (target: median <= "
          f"{SINGLE_MEDIAN_US:.0f} us, max <= {SINGLE_MAX_US:.0f} us):")
    for s in singles:
        print(f"  V {s['vocab']:7d} (n {s['n']:2d}): ours median {s['ours_median']:7.1f} "
              f"max {s['ours_max']:7.1f} | vLLM median {s['vllm_median']:7.1f} max {s['vllm_max']:7.1f}  "
              f"{_verdict(s['ok'])}")
    if singles:
        every = _single([r for r in rows if r["reqs"] == 1])
        print(f"  every V   (n {every['n']:2d}): ours median {every['ours_median']:7.1f} "
              f"max {every['ours_max']:7.1f} | vLLM median {every['vllm_median']:7.1f} "
              f"max {every['vllm_max']:7.1f}")
    host = [r for r in rows if r.get("ours_host_us") is not None]
    if host:
        print(f"  host time of one call, back to back, median: ours {_median(host, 'ours_host_us'):.1f} us, "
              f"vLLM {_median(host, 'vllm_host_us'):.1f} us (do_bench's L2 flush lets the host run ahead, so "
              "event times of host-bound calls can understate their back-to-back cost)")
    print("\nverdict" + (" (--smoke: plumbing only, not a measurement)" if smoke else "") + ":")
    if groups:
        print(f"  speed-up over vLLM at {scope}: {_verdict(all(g['ok'] for g in groups))} "
              f"({sum(g['ok'] for g in groups)} of {len(groups)} groups meet median >= {SPEEDUP_MEDIAN}x and "
              f"min >= {SPEEDUP_MIN}x; lowest shape {min(r['speedup'] for r in big):.2f}x)")
    else:
        print(f"  speed-up over vLLM: no shape with >= {min_reqs} requests measured")
    if with_floor:
        print(f"  within {FLOOR_RATIO}x of the floor at {scope}: {_verdict(not over)} "
              f"({len(with_floor) - len(over)} of {len(with_floor)} shapes)")
    else:
        print("  floor: " + ("not measured (--smoke or --no-floors)" if big else
                             f"no shape with >= {min_reqs} requests measured"))
    if singles:
        print(f"  single request: {_verdict(all(s['ok'] for s in singles))} "
              f"({sum(s['ok'] for s in singles)} of {len(singles)} vocabularies)")
    else:
        print("  single request: no single-request shape measured")
    bad = [r for r in rows if not r["emitted_ok"]]
    if bad:
        print(f"  num_emitted out of [1, k + 1] on {len(bad)} shapes: {', '.join(map(shape_name, bad))}")


def header(smoke: bool, device: torch.device, copy_bw: float | None) -> dict:
    """What the run ran on (printed, and written at the head of --json)."""
    import triton

    head = dict(schema=SCHEMA, smoke=smoke, device=str(device), torch=torch.__version__,
                triton=triton.__version__, vllm=vllm_adapter.installed_version(),
                vllm_import_notes=list(vllm_adapter.IMPORT_NOTES), copy_bw=copy_bw)
    if device.type == "cuda":
        head["device"] = torch.cuda.get_device_name(device)
    print(f"device: {head['device']}  torch {head['torch']}  triton {head['triton']}  vLLM {head['vllm']}")
    for note in head["vllm_import_notes"]:
        print(f"vLLM import: {note}")
    if copy_bw is not None:
        print(f"device-to-device copy bandwidth: {copy_bw / 1e9:.0f} GB/s")
    return head


def write_json(path: str, head: dict, rows: list[dict]) -> None:
    with open(path, "w") as f:
        json.dump(dict(head, rows=rows), f, indent=1)
    print(f"wrote {len(rows)} rows to {path}")


def from_json(args) -> int:
    """The tables and verdicts of earlier runs, rows merged (a later file's shape replaces an earlier's)."""
    merged, smoke = {}, False
    for path in args.from_json:
        with open(path) as f:
            data = json.load(f)
        if data.get("schema") != SCHEMA:
            print(f"{path}: not a {SCHEMA} file (schema {data.get('schema')!r})")
            return 2
        smoke = smoke or data["smoke"]
        print(f"{path}: {len(data['rows'])} rows, {data['device']}, torch {data['torch']}, "
              f"vLLM {data['vllm']}")
        merged.update({tuple(r[key] for key in SHAPE_KEYS): r for r in data["rows"]})
    rows = list(merged.values())
    print(TABLE_HEADER)
    for r in rows:
        print(table_line(r))
    summarise(rows, args.worst, smoke)
    return 0


def unavailable(args) -> str:
    """Why nothing can be measured here (empty when it can)."""
    if not args.smoke and not torch.cuda.is_available():
        return NO_CUDA
    return vllm_adapter.vllm_available()


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_json:
        return from_json(args)
    reason = unavailable(args)
    if reason:
        print(f"bench/vs_vllm.py: nothing measured: {reason}")
        return 0
    device = default_device() if args.smoke else torch.device("cuda")
    if args.smoke:
        copy_bw, timer, with_floors = None, wall_timer(device), False
    else:
        from bench.bench_kernels import copy_bandwidth

        copy_bw, timer, with_floors = copy_bandwidth(), event_timer(args.rep), not args.no_floors
    head = header(args.smoke, device, copy_bw)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    rows, stopped = [], False
    # A time limit (``timeout``'s SIGTERM) still summarises and writes the shapes measured so far.
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print(TABLE_HEADER, flush=True)
    try:
        for shape in grid(args):
            try:
                rows.append(measure(shape, timer, gen, copy_bw, with_floors))
                print(table_line(rows[-1]), flush=True)
            except torch.cuda.OutOfMemoryError as exc:  # pragma: no cover - reported, not fatal
                print(f"{' '.join(map(str, shape))}: out of memory, skipped ({exc})", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    except KeyboardInterrupt:
        stopped = True
        print(f"stopped after {len(rows)} shapes", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    summarise(rows, args.worst, args.smoke)
    if args.json:
        write_json(args.json, head, rows)
    return 1 if stopped else 0


if __name__ == "__main__":
    sys.exit(main())
