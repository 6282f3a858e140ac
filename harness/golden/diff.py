"""Replay a golden file's cases on a kernel and say what changed, with the oracle's verdict.

``diff_golden(golden, kernel, device)`` rebuilds every recorded case (its ``input_sha`` must match,
or the case is reported ``inputs changed`` and not compared), runs the kernel and compares its answer
with the recorded one bit for bit: ``output_token_ids`` (padding included), ``num_emitted``,
``logprobs`` and, when both sides have them, the bytes of ``random_draws``. Each differing request
gets a verdict from ``harness.golden.judge`` on both answers:

- ``new wrong``: the new answer is not legal (whatever the old one was);
- ``old wrong``: the new answer is legal and the recorded one is not (a fix);
- ``both legal``: both judged by exact replay (or greedy exactness): one is a tie or a rounding-level
  logprob change, shown with its margin;
- ``legal in support``: both legal, but at least one only in support (its uniforms are unknown).

The recorded answer is replayed with the new kernel's uniforms when their bytes equal the recorded
``draws_sha``, else with ``reference.rng``'s when THOSE equal it, else judged in support only. A
kernel claiming ``Capabilities.philox_layout`` whose uniforms changed and no longer equal
``reference.rng``'s gets ``new wrong`` on field ``random_draws`` (it broke its own claim).

A case outside the new kernel's claims (method, dtype, point-mass drafts, greedy rows, V, k) is
reported ``not claimed`` and not run; logprobs are compared only when the new kernel claims them.

Exit codes (``DiffResult.exit_code``): 0 every case compared is identical; 1 a new answer is wrong;
2 a case's inputs could not be rebuilt identically (the case generator changed: record again on the
base); 3 outputs changed and every new answer is legal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from harness.contract import capabilities_of
from harness.generation.cases import build_batch
from harness.golden.file_format import Answer, Golden, batch_sha, draws_sha, run_kernel
from harness.golden.judge import GREEDY, REPLAY, judge
from harness.judging.oracle import reference_draws

IDENTICAL, DIFFERENT, INPUTS_CHANGED, NOT_CLAIMED = "identical", "different", "inputs changed", "not claimed"
NEW_WRONG, OLD_WRONG, BOTH_LEGAL, IN_SUPPORT = "new wrong", "old wrong", "both legal", "legal in support"
VERDICTS = (NEW_WRONG, OLD_WRONG, BOTH_LEGAL, IN_SUPPORT)


@dataclass
class RequestDiff:
    request: int
    field: str  # first differing field of this request
    verdict: str
    old: dict  # the old answer's judgement (golden_judge.Judgement.to_json)
    new: dict
    margin: float | None = None  # tie margin, or the largest logprob change
    old_tokens: list = field(default_factory=list)
    new_tokens: list = field(default_factory=list)


@dataclass
class CaseDiff:
    index: int
    summary: str
    status: str  # IDENTICAL | DIFFERENT | INPUTS_CHANGED | NOT_CLAIMED
    first_field: str = ""
    requests: list[RequestDiff] = field(default_factory=list)
    note: str = ""
    seconds: float = 0.0


@dataclass
class DiffResult:
    header: dict
    cases: list[CaseDiff] = field(default_factory=list)
    seconds: float = 0.0
    of_cases: int = 0  # cases in the golden file (more than len(cases) after a fail-fast stop)

    def counts(self) -> dict[str, int]:
        statuses = (IDENTICAL, DIFFERENT, INPUTS_CHANGED, NOT_CLAIMED)
        c = {s: sum(x.status == s for x in self.cases) for s in statuses}
        reqs = [r for x in self.cases for r in x.requests]
        c.update({v: sum(r.verdict == v for r in reqs) for v in VERDICTS})
        c["cases run"], c["cases in file"] = len(self.cases), self.of_cases
        c["ties"] = sum(
            1
            for r in reqs
            if r.verdict == BOTH_LEGAL and "tie" in (r.new.get("note", "") + r.old.get("note", ""))
        )
        return c

    @property
    def exit_code(self) -> int:
        c = self.counts()
        if c[NEW_WRONG]:
            return 1
        if c[INPUTS_CHANGED]:
            return 2
        return 3 if c[DIFFERENT] else 0

    def to_json(self) -> dict:
        from dataclasses import asdict

        return {
            "schema": "specfuzz-golden-diff/1",
            **self.header,
            "seconds": round(self.seconds, 3),
            "counts": self.counts(),
            "exit_code": self.exit_code,
            "case_seconds": [round(c.seconds, 3) for c in self.cases],
            "cases": [asdict(c) for c in self.cases if c.status != IDENTICAL],
        }


def _bits_equal(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool((a.view(torch.int32) == b.view(torch.int32)).all())


def differing_requests(old: Answer, new: Answer) -> dict[int, str]:
    """Request -> its first differing field (``num_emitted``, ``output_token_ids``, ``logprobs``)."""
    if old.error is not None or new.error is not None:
        n = len(old.num_emitted) if old.error is None else len(new.num_emitted) if new.error is None else 0
        return {} if old.error == new.error else {r: "verify" for r in range(max(n, 1))}
    if old.ids.shape != new.ids.shape or old.num_emitted.shape != new.num_emitted.shape:
        return {r: "output_token_ids (shape)" for r in range(max(len(old.num_emitted), len(new.num_emitted)))}
    out = {}
    for r in range(len(old.num_emitted)):
        if int(old.num_emitted[r]) != int(new.num_emitted[r]):
            out[r] = f"num_emitted[{r}]"
            continue
        cols = torch.nonzero(old.ids[r] != new.ids[r])
        if cols.numel():
            out[r] = f"output_token_ids[{r},{int(cols[0])}]"
            continue
        if (old.logprobs is None) != (new.logprobs is None):
            out[r] = f"logprobs[{r}] (present on one side only)"
        elif old.logprobs is not None and not _bits_equal(old.logprobs[r], new.logprobs[r]):
            j = int(torch.nonzero(old.logprobs[r].view(torch.int32) != new.logprobs[r].view(torch.int32))[0])
            out[r] = f"logprobs[{r},{j}]"
    return out


def _verdict(old, new) -> str:
    if not new.legal:
        return NEW_WRONG
    if not old.legal:
        return OLD_WRONG
    exact = (REPLAY, GREEDY)
    return BOTH_LEGAL if old.basis in exact and new.basis in exact else IN_SUPPORT


def _logprob_change(old: Answer, new: Answer, r: int) -> float | None:
    if old.logprobs is None or new.logprobs is None or old.ids is None or new.ids is None:
        return None
    n = int(new.num_emitted[r])
    return float((old.logprobs[r, :n].double() - new.logprobs[r, :n].double()).abs().max())


def _tokens(a: Answer, r: int) -> list:
    return [] if a.error is not None else a.ids[r, : int(a.num_emitted[r])].tolist()


def claim_gap(kernel: object, case) -> str:
    """What of ``case`` the kernel does not claim ('' when it claims all of it). A chunk budget is no
    gap (a kernel that ignores it must give the same outputs); unclaimed logprobs are not compared."""
    caps = capabilities_of(kernel)
    gaps = [
        (case.method not in kernel.methods, f"method {case.method}"),
        (not any(str(d).endswith(case.dtype) for d in caps.dtypes), f"dtype {case.dtype}"),
        (not case.has_draft_logits and not caps.point_mass_drafts, "point-mass drafts"),
        (case.has_draft_logits and not caps.draft_logits and max(case.draft_lens, default=0) > 0,
         "draft logits"),
        (0.0 in case.temperatures and not caps.greedy, "greedy rows"),
        (case.vocab_size > caps.max_vocab, f"V = {case.vocab_size}"),
        (max(case.draft_lens, default=0) > caps.max_draft_len, f"k = {max(case.draft_lens)}"),
    ]
    return ", ".join(what for gap, what in gaps if gap)


def _without_logprobs(a: Answer) -> Answer:
    return a if a.error is not None else Answer(a.ids, a.num_emitted, None)


def diff_case(index: int, gc, kernel: object, device: torch.device) -> CaseDiff:
    """Replay one golden case on ``kernel`` (see the module docstring)."""
    t0 = time.perf_counter()
    summary = gc.case.label or gc.case.summary()
    gap = claim_gap(kernel, gc.case)
    if gap:
        return CaseDiff(index, summary, NOT_CLAIMED, note=f"the kernel does not claim {gap}")
    batch = build_batch(gc.case, device)
    if batch_sha(batch) != gc.input_sha:
        return CaseDiff(
            index,
            summary,
            INPUTS_CHANGED,
            note="rebuilt batch differs from the recorded one",
            seconds=time.perf_counter() - t0,
        )
    new, new_sha, new_draws = run_kernel(kernel, batch)
    old = gc.answer
    if not capabilities_of(kernel).logprobs:
        old, new = _without_logprobs(old), _without_logprobs(new)
    changed = differing_requests(old, new)
    draws_changed = gc.draws_sha is not None and new_sha is not None and gc.draws_sha != new_sha
    if not changed and not draws_changed:
        return CaseDiff(index, summary, IDENTICAL, seconds=time.perf_counter() - t0)
    cpu = batch.to("cpu")
    old_draws, layout_broken = None, False
    if gc.draws_sha is not None and gc.draws_sha == new_sha:
        old_draws = new_draws
    elif gc.draws_sha is not None or (new_sha is not None and capabilities_of(kernel).philox_layout):
        ref = reference_draws(cpu)
        ref_sha = draws_sha(*ref)
        old_draws = ref if gc.draws_sha == ref_sha else None
        layout_broken = new_sha is not None and capabilities_of(kernel).philox_layout and new_sha != ref_sha
    requests = sorted(changed)
    jo = judge(cpu, old, requests, old_draws)
    jn = judge(cpu, new, requests, new_draws)
    diffs = []
    for r in requests:
        verdict = _verdict(jo[r], jn[r])
        margin = next((j.margin for j in (jn[r], jo[r]) if j.tie), None)
        if margin is None and changed[r].startswith("logprobs"):
            margin = _logprob_change(old, new, r)
        diffs.append(
            RequestDiff(
                r,
                changed[r],
                verdict,
                jo[r].to_json(),
                jn[r].to_json(),
                margin,
                _tokens(old, r),
                _tokens(new, r),
            )
        )
    note = ""
    if draws_changed:
        note = "random_draws changed" + (
            " and no longer equal reference.rng (the kernel claims philox_layout)" if layout_broken else ""
        )
        if layout_broken:
            diffs.insert(0, RequestDiff(-1, "random_draws", NEW_WRONG, {}, {"legal": False, "note": note}))
    first = diffs[0].field if diffs else "random_draws"
    if not diffs:  # draws changed, outputs identical, claim intact: a legal change of the stream
        diffs.append(RequestDiff(-1, "random_draws", BOTH_LEGAL if gc.draws_sha else IN_SUPPORT, {}, {}))
    return CaseDiff(index, summary, DIFFERENT, first, diffs, note, time.perf_counter() - t0)


def diff_golden(
    golden: Golden,
    kernel: object,
    device: torch.device,
    header: dict,
    progress=lambda s: None,
    fail_fast: bool = False,
) -> DiffResult:
    """Every case of ``golden`` replayed on ``kernel`` (``fail_fast``: stop after the first case
    with a new answer wrong; ``DiffResult.of_cases`` keeps the number of cases in the file)."""
    t0 = time.perf_counter()
    result = DiffResult(dict(header), of_cases=len(golden.cases))
    for i, gc in enumerate(golden.cases):
        cd = diff_case(i, gc, kernel, device)
        result.cases.append(cd)
        if cd.status != IDENTICAL:
            progress(format_case(cd))
        if fail_fast and any(r.verdict == NEW_WRONG for r in cd.requests):
            break
    result.seconds = time.perf_counter() - t0
    return result


def format_case(cd: CaseDiff, max_requests: int = 3) -> str:
    if cd.status in (INPUTS_CHANGED, NOT_CLAIMED):
        return f"case {cd.index} [{cd.summary}]: {cd.status.upper()} ({cd.note})"
    verdicts = {}
    for r in cd.requests:
        verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
    lines = [
        f"case {cd.index} [{cd.summary}]: first difference {cd.first_field}; "
        + ", ".join(f"{n} {v}" for v, n in verdicts.items())
        + (f" ({cd.note})" if cd.note else "")
    ]
    for r in cd.requests[:max_requests]:
        if r.request < 0:
            continue
        why = r.new if r.verdict == NEW_WRONG else r.old if r.verdict == OLD_WRONG else r.new
        margin = "" if r.margin is None else f", margin {r.margin:.3g}"
        lines.append(
            f"    request {r.request} {r.field}: {r.verdict} -- old {r.old_tokens} new {r.new_tokens}"
            f"{margin}; {why.get('basis', '')}: {why.get('note', '')}"
        )
    return "\n".join(lines)


def format_summary(result: DiffResult) -> str:
    c = result.counts()
    total = f"{len(result.cases)}" + (f" of {result.of_cases}" if result.of_cases > len(result.cases) else "")
    return (
        f"{total} cases: {c[IDENTICAL]} identical, {c[DIFFERENT]} differ, "
        f"{c[INPUTS_CHANGED]} inputs changed, {c[NOT_CLAIMED]} not claimed; differing requests: "
        f"{c[NEW_WRONG]} new wrong, {c[OLD_WRONG]} old wrong, {c[BOTH_LEGAL]} both legal ({c['ties']} ties), "
        f"{c[IN_SUPPORT]} legal in support; {result.seconds:.1f} s; exit {result.exit_code}"
    )
