"""Targeted reproductions of the outside engines' defects read from their sources (docs/findings/
flashinfer-0.7.4.md, docs/findings/sglang-kernel-0.4.6.md), on a GPU with the engines installed.

    PYTHONPATH=. python bench/engine_repros.py [sglang-coin0 sglang-greedy-ties flashinfer-minus-one
        flashinfer-empty-residual flashinfer-nan-draft-row]
        [--json OUT]

Each prints one line ``<name>: REPRODUCED|NOT REPRODUCED|UNAVAILABLE -- evidence`` and the JSON file
holds the evidence. Every check can fail: each states what a correct verifier would do.

    PYTHONPATH=. python bench/engine_repros.py --upstream

runs instead the standalone script of each upstream report (the python block of
docs/findings/upstream-*.md: torch and the engine, no specfuzz) in a fresh process, and prints its
exit status (an ``AssertionError`` is the defect shown), output and seconds. Where the engine is
installed trimmed (bench/scorecard_gpu.sh: FlashInfer's package ``__init__`` cannot import, SGLang's
is never run), or vLLM runs without CUDA (its MRV2 kernels are Triton: on a CPU they run under the
interpreter, which vLLM's import needs help with), a preamble first makes ``flashinfer.sampling`` /
``sgl_kernel`` / vLLM's verifier importable the way the adapters load them; the report's script
itself runs unchanged. ``--upstream`` runs on a CPU too: the vLLM reports' scripts then run under
Triton's interpreter.

- ``sglang-coin0`` (sglang#35771): one request, a point-mass draft whose target probability is 0, the
  acceptance coin exactly 0 (``torch.rand`` can return it). Correct: rejected. Control: coin 2^-24.
- ``sglang-greedy-ties``: a greedy request whose target rows tie at the maximum (tokens 0, 3 and 5),
  draft 5, verified alone (an all-greedy batch: ``verify_tree_greedy`` on ``argmax``) and beside a
  sampled request (``tree_speculative_sampling_target_only`` after ``top_k_renorm_probs(k = 1)``),
  for three coin values. Correct: the same tokens in both (a greedy request's output must not depend
  on its batch mates' temperatures). Control: the same with a strict maximum at token 3.
- ``flashinfer-minus-one`` (flashinfer#879): draft id ``-1`` in the second row of a call (so the read
  at index -1 stays inside the buffer: the last entry of the previous row). Correct: never accepted,
  never emitted. Read from source: the draft probability read there is 0 and the target's positive,
  so ``u * 0 < q`` accepts it and ``-1`` is emitted as a token.
- ``flashinfer-empty-residual``: draft rows ``(0.5 + 2^-24, 0.5)``, target rows ``(0.5, 0.5)`` (both
  normalised within float32 rounding), draft token 0: rejected when ``u * p >= q`` (``u`` within
  2^-23 of 1); the residual ``relu(q - p)`` is then all zero and, read from source, the correction
  written is ``-1``. Correct: an id in ``[0, V)``. Runs 2^26 rows in 64 calls (expected events ~8).
- ``flashinfer-nan-draft-row``: the case ``degenerate_rows_outcome`` failed on (H100, 2026-12-07): a
  draft row all ``-inf``, so its probabilities (softmax) are NaN, with target rows uniform, at V = 1
  and V = 8. Read from source: the acceptance test with a NaN draft probability rejects, the residual
  ``relu(p - NaN)`` has no positive entry, and the ``-1`` fallback of item 2 is written. Correct: an
  id in ``[0, V)``, or an error.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from harness.contract import VerifyBatch


def _point_batch(target_logits, ids, cu, temps, seeds, positions) -> VerifyBatch:
    dev = target_logits.device
    return VerifyBatch(
        target_logits=target_logits,
        draft_logits=None,
        draft_token_ids=torch.tensor(ids, dtype=torch.int64, device=dev),
        cu_num_draft_tokens=torch.tensor(cu, dtype=torch.int32, device=dev),
        temperature=torch.tensor(temps, dtype=torch.float32, device=dev),
        seeds=torch.tensor(seeds, dtype=torch.int64, device=dev),
        positions=torch.tensor(positions, dtype=torch.int64, device=dev),
    )


def sglang_coin0() -> dict:
    from harness.adapters import sglang

    why = sglang.sglang_available()
    if why:
        return {"verdict": "UNAVAILABLE", "evidence": why}
    vocab, draft = 8, 3
    logits = torch.zeros(2, vocab, device="cuda")
    logits[0, draft] = float("-inf")  # the target gives the draft probability exactly 0
    batch = _point_batch(logits, [draft], [0, 1], [1.0], [1], [0])
    runs = {}
    for label, coin in (("coin 0", 0.0), ("coin 2^-24", 2.0**-24)):
        coins = torch.full((1, 2), coin, device="cuda")
        out = sglang.chain.verify_with_coins(batch, coins, torch.full((1,), 0.5, device="cuda"))
        runs[label] = {"tokens": out.output_token_ids[0].tolist(), "num_emitted": int(out.num_emitted[0])}
    accepted = runs["coin 0"]["num_emitted"] == 2 and runs["coin 0"]["tokens"][0] == draft
    control_ok = runs["coin 2^-24"]["num_emitted"] == 1
    verdict = "REPRODUCED" if accepted and control_ok else "NOT REPRODUCED"
    return {"verdict": verdict, "evidence": f"draft {draft} has target probability 0; {runs}"}


def sglang_greedy_ties() -> dict:
    from harness.adapters import sglang

    why = sglang.sglang_available()
    if why:
        return {"verdict": "UNAVAILABLE", "evidence": why}
    vocab, draft = 8, 5
    runs = {}
    for label, maxima in (("ties at 0, 3, 5", [0, 3, 5]), ("control: strict max at 3", [3])):
        logits = torch.zeros(4, vocab, device="cuda")
        logits[:2, maxima] = 2.0  # request 0 (greedy): both of its rows
        logits[2:] = torch.arange(vocab, device="cuda", dtype=torch.float32) / vocab  # request 1 (T = 1)
        alone = _point_batch(logits[:2], [draft], [0, 1], [0.0], [1], [0])
        mixed = _point_batch(logits, [draft, 1], [0, 1, 2], [0.0, 1.0], [1, 2], [0, 0])
        want = sglang.chain.verify(alone)
        got = {}
        for coin in (0.1, 0.5, 0.9):
            out = sglang.chain.verify_with_coins(mixed, torch.full((2, 2), coin, device="cuda"),
                                                 torch.full((2,), coin, device="cuda"))
            got[coin] = out.output_token_ids[0, : int(out.num_emitted[0])].tolist()
        alone_tokens = want.output_token_ids[0, : int(want.num_emitted[0])].tolist()
        runs[label] = {"alone": alone_tokens, "beside a sampled request": got,
                       "differs": any(t != alone_tokens for t in got.values())}
    ties, control = runs["ties at 0, 3, 5"], runs["control: strict max at 3"]
    verdict = "REPRODUCED" if ties["differs"] and not control["differs"] else "NOT REPRODUCED"
    return {"verdict": verdict, "evidence": str(runs)}


def flashinfer_minus_one() -> dict:
    from harness.adapters import flashinfer

    why = flashinfer.flashinfer_available()
    if why:
        return {"verdict": "UNAVAILABLE", "evidence": why}
    vocab = 16
    gen = torch.Generator(device="cuda").manual_seed(5)
    logits = torch.randn(6, vocab, device="cuda", generator=gen)
    batch = _point_batch(logits, [2, 7, -1, 5], [0, 2, 4], [1.0, 1.0], [3, 4], [10, 20])
    try:
        out = flashinfer.chain.verify(batch)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 -- a fault is evidence too
        return {"verdict": "REPRODUCED", "evidence": f"the call failed: {type(exc).__name__}: {exc}"}
    n = int(out.num_emitted[1])
    emitted = out.output_token_ids[1, :n].tolist()
    verdict = "REPRODUCED" if -1 in emitted else "NOT REPRODUCED"
    return {"verdict": verdict, "evidence": f"request 1 drafts [-1, 5] emitted {emitted} (num_emitted {n})"}


def flashinfer_empty_residual(calls: int = 64, rows: int = 1 << 20) -> dict:
    from harness.adapters import flashinfer

    why = flashinfer.flashinfer_available()
    if why:
        return {"verdict": "UNAVAILABLE", "evidence": why}
    chain = flashinfer._api().chain
    draft = torch.tensor([0.5 + 2.0**-24, 0.5], device="cuda").expand(rows, 1, 2).contiguous()
    target = torch.full((rows, 2, 2), 0.5, device="cuda")
    ids = torch.zeros((rows, 1), dtype=torch.int32, device="cuda")
    rejected = minus_one = 0
    for c in range(calls):
        seed = torch.full((rows,), 1000 + c, dtype=torch.int64, device="cuda")
        offset = torch.arange(rows, dtype=torch.int64, device="cuda")
        out, _acc, emitted = chain(draft, ids, target, deterministic=True, seed=seed, offset=offset)
        rej = emitted == 0
        rejected += int(rej.sum())
        minus_one += int((out[rej, 0] == -1).sum())
    verdict = "REPRODUCED" if minus_one else "NOT REPRODUCED"
    evidence = f"{calls * rows} rows: {rejected} rejections of draft 0, {minus_one} wrote correction -1"
    if not rejected:
        evidence += " (no rejection drawn: the path was not reached)"
    return {"verdict": verdict, "evidence": evidence}


def flashinfer_nan_draft_row() -> dict:
    from harness.adapters import flashinfer

    why = flashinfer.flashinfer_available()
    if why:
        return {"verdict": "UNAVAILABLE", "evidence": why}
    chain = flashinfer._api().chain
    seen, bad = {}, False
    for vocab in (1, 8):
        draft = torch.softmax(torch.full((1, 1, vocab), float("-inf"), device="cuda"), -1)  # NaN
        target = torch.softmax(torch.zeros(1, 2, vocab, device="cuda"), -1)
        ids = torch.zeros((1, 1), dtype=torch.int32, device="cuda")
        seed = torch.full((1,), 7, dtype=torch.int64, device="cuda")
        out, _acc, emitted = chain(draft, ids, target, deterministic=True, seed=seed,
                                   offset=torch.zeros(1, dtype=torch.int64, device="cuda"))
        tokens = out[0, : int(emitted[0]) + 1].tolist()  # accepted drafts, then the correction or bonus
        seen[f"V={vocab}"] = tokens
        bad = bad or any(not 0 <= t < vocab for t in tokens)
    return {"verdict": "REPRODUCED" if bad else "NOT REPRODUCED", "evidence": f"emitted {seen}"}


CHECKS = {
    "sglang-coin0": sglang_coin0,
    "sglang-greedy-ties": sglang_greedy_ties,
    "flashinfer-minus-one": flashinfer_minus_one,
    "flashinfer-empty-residual": flashinfer_empty_residual,
    "flashinfer-nan-draft-row": flashinfer_nan_draft_row,
}


TRIMMED_PREAMBLE = """
import importlib, importlib.util, sys, types
import torch
try:  # without CUDA vLLM imports Triton as a placeholder: the adapter's import runs it interpreted
    if not torch.cuda.is_available():
        raise ImportError("no CUDA")
    import vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils  # noqa: F401
except Exception:
    try:
        from harness.adapters import vllm as _vl
        _vl._import_vllm()
    except Exception as exc:
        print("preamble: vllm not loaded:", exc)
try:
    import flashinfer.sampling  # noqa: F401
except Exception:
    try:
        from harness.adapters import flashinfer as _fi
        _fi._import_sampling_module()
    except Exception as exc:
        print("preamble: flashinfer not loaded:", exc)
try:
    from sgl_kernel import tree_speculative_sampling_target_only  # noqa: F401
except Exception:
    try:
        from harness.adapters import sglang as _sg
        _sg._ops()
        _spec = importlib.util.find_spec("sgl_kernel")
        _pkg = types.ModuleType("sgl_kernel")
        _pkg.__path__ = list(_spec.submodule_search_locations)
        sys.modules["sgl_kernel"] = _pkg
        for _name in ("speculative", "sampling"):
            _mod = importlib.import_module("sgl_kernel." + _name)
            _pkg.__dict__.update({k: v for k, v in vars(_mod).items() if not k.startswith("_")})
    except Exception as exc:
        print("preamble: sgl_kernel not loaded:", exc)
"""


def upstream_reports(only=()) -> list:
    """The upstream reports (docs/findings/upstream-*.md) whose names contain any of ``only``."""
    from pathlib import Path

    reports = sorted((Path(__file__).resolve().parent.parent / "docs" / "findings").glob("upstream-*.md"))
    return [r for r in reports if not only or any(name in r.name for name in only)]


def run_upstream_script(report, timeout: float = 120.0) -> tuple[object, str, bool]:
    """Run a report's standalone script (its first python block) after ``TRIMMED_PREAMBLE`` in a fresh
    process: ``(exit status or "timeout" / "no script", output, whether the script's own assertion
    failed)``."""
    import re
    import subprocess

    blocks = re.findall(r"```python\n(.*?)```", report.read_text(), flags=re.S)
    if not blocks:
        return "no script", "", False
    try:
        done = subprocess.run([sys.executable, "-c", TRIMMED_PREAMBLE + blocks[0]], capture_output=True,
                              text=True, timeout=timeout, cwd=report.parents[2])
        rc, text = done.returncode, (done.stdout + done.stderr).strip()
    except subprocess.TimeoutExpired:
        return "timeout", f"no result within {timeout:.0f} s", False
    lines = text.splitlines()
    frames = [line for line in lines if line.lstrip().startswith('File "')]
    own_assert = bool(lines) and lines[-1].startswith("AssertionError") and bool(frames) \
        and frames[-1].lstrip().startswith('File "<string>"')  # the script's assert, not torch's
    return rc, text, own_assert


def upstream_scripts(only=()) -> int:
    """``--upstream`` (module docstring): 0 when every script ran to its end or to its own failed
    assertion (the defect shown); any other error (an import, a CUDA error) is 1."""
    import time

    trouble = 0
    for report in upstream_reports(only):
        started = time.perf_counter()
        rc, text, own_assert = run_upstream_script(report)
        shown = "DEFECT SHOWN (the script's assertion failed)" if own_assert else f"exit {rc}"
        if not (rc == 0 or own_assert):
            trouble += 1
        tail = " | ".join(text.splitlines()[-4:])[:600]
        print(f"{report.name}: {shown} in {time.perf_counter() - started:.1f}s -- {tail}", flush=True)
    return 1 if trouble else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"any of {', '.join(CHECKS)} (default: all)")
    parser.add_argument("--json", help="write the verdicts and evidence here")
    parser.add_argument("--upstream", action="store_true", help="run the upstream reports' scripts")
    args = parser.parse_args(argv)
    if args.upstream:
        return upstream_scripts(args.names)
    unknown = sorted(set(args.names) - set(CHECKS))
    if unknown:
        parser.error(f"unknown reproductions {unknown}; known: {', '.join(CHECKS)}")
    if not torch.cuda.is_available():
        print("engine_repros: no CUDA device; these reproductions run on a GPU (bench/scorecard_gpu.sh)")
        return 0
    results = {}
    for name in args.names or list(CHECKS):
        try:
            results[name] = CHECKS[name]()
        except Exception as exc:  # noqa: BLE001 -- report and go on to the next one
            results[name] = {"verdict": "ERROR", "evidence": f"{type(exc).__name__}: {exc}"}
        print(f"{name}: {results[name]['verdict']} -- {results[name]['evidence']}"[:400], flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
