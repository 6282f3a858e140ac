"""Layer 4: the kernel's OWN randomness judged against exact laws (SPEC.md sections 4, 5 and 7).

Registered properties (each claimed by every kernel for the methods it declares):
- ``conditional_law``: ``(tau, Y)`` for fixed drafts vs ``reference.laws.conditional_law``, in
  float32 and, for kernels that claim them, bfloat16 and float16 logits (the other properties are
  float32-only);
- ``marginal_law``: the output ``(accepted prefix, Y)`` over drafts sampled from a context-dependent
  draft model vs ``reference.laws.output_law``;
- ``first_token_law``: the first emitted token on large-V rows vs the target row, in equal-mass bins
  (index order = probability order, so the last bins are the tail) plus a zero-probability cell;
- ``expected_accepted``: ``E[tau]`` vs its exact value (Bernstein bound with the exact variance);
- ``block_dominates_token``: ``E_block[tau] >= E_token[tau]`` over sampled drafts (one-sided).

Every assertion sizes ``n`` so that a total-variation error of ``profile.stat_tv`` (on the pooled
cells) is detected with probability >= 0.999 at level ``assertion_alpha(profile)``, capped by
``profile.stat_max_samples`` (or ``ctx.extra["stat_max_samples"]``); the StatRecord states the TV
actually detectable at the ``n`` used. A rejection is confirmed once with fresh seeds and 4x the
samples; an observation in a cell of exact probability 0 fails at once.

Time-sized runs (``sized_samples``): a kernel too slow for those sizes within the profile's seconds
per property (Triton's CPU interpreter: 0.08-0.14 s per request on a 2-core machine) is not skipped; its
assertions get ``n`` scaled down to what that time affords at the kernel's measured cost (a power of
two, the same for every assertion of the property, at least ``TIME_SIZED_FLOOR``), in the property's
priority order; those the time cannot reach at the floor are left out and named in the note. The
alpha is unchanged, so a weaker run detects only larger errors: each StatRecord's ``detectable_tv``
says how large, and ``check``'s verdict line gives their range. In ``check`` with the ci profile
(the CPU main job) a time-sized property's seconds are not the profile's fixed ones but its share of
what the case properties left of ``CHECK_SECONDS`` (``_window_share``): a fast day buys more samples,
a slow day fewer, and the run still ends near its bound.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import norm

from harness.contract import VerifyBatch, VerifyOutput, capabilities_of
from harness.execution.transport import tiled
from harness.judging import stats
from harness.properties.base import (
    FAIL,
    PASS,
    SKIPPED,
    Finding,
    PropertyResult,
    RunContext,
    StatRecord,
    register,
    unclaimed_result,
)
from harness.properties.statistical_cases import (
    FixedDraftRequest,
    LargeVocabRow,
    ModelPair,
    equal_mass_bins,
    fixed_draft_requests,
    large_vocab_rows,
    model_pairs,
)
from harness.properties.statistical_sampling import (
    assertion_alpha,
    batch_size,
    count_cells,
    emitted_tau,
    final_token,
    replicated_batches,
    seed_block,
)
from harness.timing.budget import DEADLINE_KEY, SKIPPED_FOR_BUDGET, budget_note, deadline_passed
from reference.laws import accepted_variance, conditional_law, expected_accepted, output_law

MIN_SAMPLES = 256
FIRST_TOKEN_BINS = 32
# Kernel time one statistical property may spend per profile, times its share below (outside
# ``check``'s window, CHECK_SECONDS: tests, benches, campaigns). A kernel too slow to reach the
# profile's sample sizes within it (Triton's CPU interpreter: 0.08-0.14 s per request) runs
# time-sized (``sized_samples``): fewer samples, a larger detectable TV, stated per assertion. ci:
# conditional 30 s, marginal 40 s (its draws also serve E[tau] and block >= token, which needs a
# model pair's two methods: 2 x 64 requests), first-token 20 s (V = 300 rows, the least informative
# at that power).
STAT_SECONDS_PER_PROPERTY = {"ci": 30.0, "dev": 600.0, "gpu": 300.0, "nightly": 3600.0}
STAT_SECONDS_SHARE = {"marginal_law": 4 / 3, "first_token_law": 2 / 3}
# The properties that spend kernel time, in run order (E[tau] and block >= token reuse marginal's draws).
TIME_SPENDERS = ("conditional_law", "marginal_law", "first_token_law")
# ``check`` of these profiles aims to end this many seconds after it starts (the CPU main job's
# 6-minute bound, less a margin): ``ctx.extra[STATISTICS_END_KEY]`` holds that instant, and a
# time-sized property's seconds are its share of what the case properties left (``sized_samples``).
CHECK_SECONDS = {"ci": 300.0}
STATISTICS_END_KEY = "statistics_end"
SPENDERS_KEY = "statistics_spenders"  # the TIME_SPENDERS a check runs (selected and claimed)
# Fewest samples a time-sized assertion takes; assertions the time cannot give this many are left out.
TIME_SIZED_FLOOR = 64
SAMPLE_CAP_ENV = "SPECFUZZ_STAT_MAX_SAMPLES"


def _sample_cap(ctx: RunContext) -> int:
    """``profile.stat_max_samples``, lowered by ``ctx.extra["stat_max_samples"]`` or the environment
    variable SPECFUZZ_STAT_MAX_SAMPLES (a deterministic way to run weaker tests on a slow kernel)."""
    cap = ctx.profile.stat_max_samples
    for override in (ctx.extra.get("stat_max_samples"), os.environ.get(SAMPLE_CAP_ENV)):
        if override:
            cap = min(cap, int(override))
    return int(cap)


def kernel_cost(kernel: object, ctx: RunContext) -> tuple[float, float]:
    """``(seconds per call, seconds per replicated request)`` of the kernel on this device, measured
    once per run: a 16-request warm-up (absorbs JIT compilation), then 16 requests again; when those
    took over 0.125 s (8 ms per request: the CPU interpreter) the cost is all per request and the
    pilot stops there (~5 s of interpreter time), else 64 and 1024 requests in one call each. A GPU
    kernel costs mostly per call (launches), the CPU interpreter per request."""
    cache = ctx.extra.setdefault("statistical_kernel_cost", {})
    if id(kernel) not in cache:
        # a request of a kind the kernel accepts: a target-only kernel (SGLang's) gets point-mass drafts
        target_only = not capabilities_of(kernel).draft_logits
        request = next(r for r in fixed_draft_requests(ctx.rng("statistical", "pilot"))
                       if not target_only or r.draft is None)
        base = request.batch(sorted(kernel.methods)[-1], ctx.device)

        def timed(n: int) -> float:
            started = time.perf_counter()
            count_cells(kernel, replicated_batches(base, n, 1), lambda o, b, a: o.num_emitted * 0, 1)
            return time.perf_counter() - started

        timed(16)
        pilot = timed(16)
        if pilot > 0.125:
            cache[id(kernel)] = (0.0, pilot / 16)
        else:
            small = timed(64)
            per_request = max(0.0, (timed(1024) - small) / 960)
            cache[id(kernel)] = (max(0.0, small - 64 * per_request), per_request)
    return cache[id(kernel)]


def projected_seconds(kernel: object, ctx: RunContext, total_samples: int) -> float:
    """Kernel time for ``total_samples`` replicated requests, in calls of the statistical layer's
    batch size on this device (a conservative small-V batch: rows of 8 x 1024 float32)."""
    per_call, per_request = kernel_cost(kernel, ctx)
    calls = -(-total_samples // batch_size(ctx.device, 8, 1024, total_samples))
    return calls * per_call + total_samples * per_request


PROBE_REQUESTS = 16
TIME_SIZED = "time-sized"


def timed_probe(call: Callable[[], None], device: torch.device) -> float:
    """Seconds of ``call`` (a probe's kernel calls); on a GPU after one untimed call that absorbs JIT
    compilation, and synchronised, so that asynchronous work is counted."""
    if device.type == "cuda":
        call()
        torch.cuda.synchronize(device)
    began = time.perf_counter()
    call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - began


@dataclass
class SamplePlan:
    """Samples per assertion (in the property's order; 0: left out) and the note that says why the
    sizes differ from the profile's, empty when they do not."""

    sizes: list[int]
    note: str = ""


def _pow2_floor(x: float) -> int:
    return 1 << int(math.floor(math.log2(x))) if x >= 1 else 0


def sized_samples(
    kernel: object,
    ctx: RunContext,
    name: str,
    wants: list[int],
    labels: list[str],
    started: float,
    probe: Callable[[], float] | None = None,
) -> SamplePlan | PropertyResult:
    """The samples each assertion of property ``name`` takes (``wants``: the profile's sizes, in
    priority order; ``labels`` name them), or a "skipped" result.

    The kernel time ``wants`` would take is projected from ``kernel_cost`` and from ``probe``, which
    times ``PROBE_REQUESTS`` requests of the property's own size (after one untimed call on a GPU,
    which absorbs JIT compiles: ``timed_probe``): a request's cost grows with its logits, and the
    pilot's has 32. On a GPU that matters for kernels whose host side handles the logits (an engine
    adapter's softmax over 262144-wide rows): from the pilot alone, FlashInfer's and SGLang's
    first-token law projected minutes less than they took (H100, 2026-12-07: over 195 s and 312 s,
    cut unfinished). Within the profile's seconds for one
    property (``STAT_SECONDS_PER_PROPERTY``, or ``ctx.extra["stat_seconds_per_property"]``, set by
    tests and benches; times ``STAT_SECONDS_SHARE[name]``) the plan is ``wants``. Over them the run is
    time-sized (module docstring): every assertion takes ``min(want, n)`` with ``n`` the largest power
    of two the time affords per assertion; when that is below ``TIME_SIZED_FLOOR``, the first
    assertions that fit take the floor and the rest are left out; when not even one fits, the
    property is skipped with the projection. With ``ctx.extra[STATISTICS_END_KEY]`` set (``check``,
    ci profile) the seconds are ``_window_share``'s instead. ``check --budget``'s share
    (``ctx.extra[DEADLINE_KEY]``, also a fuzz campaign's deadline) is a hard limit: a plan that
    does not fit it is "skipped for budget", not shrunk."""
    per_property = (ctx.extra.get("stat_seconds_per_property")
                    or STAT_SECONDS_PER_PROPERTY.get(ctx.profile.name, 600.0))
    budget = per_property * STAT_SECONDS_SHARE.get(name, 1.0)
    total = sum(wants)
    projected = projected_seconds(kernel, ctx, total)
    if probe is not None and total:
        projected = max(projected, total * probe() / PROBE_REQUESTS)
    if ctx.extra.get(STATISTICS_END_KEY) is not None and total:
        budget = _window_share(ctx, name, projected / total, budget)
    plan = SamplePlan(list(wants))
    if projected > budget:
        per_request = projected / total
        affordable = budget / per_request
        n = _pow2_floor(affordable / len(wants))
        if n >= TIME_SIZED_FLOOR:
            plan.sizes = [min(w, n) for w in wants]
        else:
            fit = int(affordable // TIME_SIZED_FLOOR)
            n = TIME_SIZED_FLOOR
            plan.sizes = [min(w, n) if i < fit else 0 for i, w in enumerate(wants)]
        if not any(plan.sizes):
            note = (f"not run: {total} samples would take ~{projected:.0f}s at this kernel's speed and "
                    f"{TIME_SIZED_FLOOR} for one assertion ~{TIME_SIZED_FLOOR * per_request:.0f}s (budget "
                    f"{budget:.0f}s in profile {ctx.profile.name}); run on a GPU")
            return PropertyResult(name=name, layer=4, verdict=SKIPPED,
                                  seconds=time.perf_counter() - started, note=note)
        left_out = [lab for lab, size in zip(labels, plan.sizes, strict=True) if not size]
        plan.note = (f"{TIME_SIZED} to this kernel's speed ({per_request * 1e3:.0f} ms per request, "
                     f"{budget:.0f}s for this property): n <= {n} per assertion instead of up to "
                     f"{max(wants)}")
        if left_out:
            shown = ", ".join(left_out[:4]) + (", ..." if len(left_out) > 4 else "")
            plan.note += f"; {len(left_out)} of {len(wants)} assertions left out ({shown})"
        projected = per_request * sum(plan.sizes)
    deadline = ctx.extra.get(DEADLINE_KEY)
    share = None if deadline is None else deadline - time.perf_counter()
    if share is not None and projected > share:
        note = (f"{SKIPPED_FOR_BUDGET}: not started, {sum(plan.sizes)} samples would take "
                f"~{projected:.0f}s, its share of the run's time budget is {max(share, 0.0):.0f}s")
        return PropertyResult(name=name, layer=4, verdict=SKIPPED, seconds=time.perf_counter() - started,
                              note=note)
    return plan


def _window_share(ctx: RunContext, name: str, per_request: float, fixed: float) -> float:
    """Seconds for property ``name`` in a check that aims to end at ``ctx.extra[STATISTICS_END_KEY]``:
    its share (``STAT_SECONDS_SHARE``) of the time left among the kernel-time properties of this run
    still to come (``ctx.extra[SPENDERS_KEY]``: those ``check`` selected and the kernel claims; all
    of ``TIME_SPENDERS`` when unset). At least one assertion at ``TIME_SIZED_FLOOR`` where that fits
    the profile's ``fixed`` seconds, so a slow day runs every property weaker instead of skipping one;
    a kernel too slow even for that keeps ``fixed`` and is reported "not run" (``sized_samples``)."""
    left = max(0.0, ctx.extra[STATISTICS_END_KEY] - time.perf_counter())
    spenders = [n for n in TIME_SPENDERS if n in ctx.extra.get(SPENDERS_KEY, TIME_SPENDERS)]
    later = spenders[spenders.index(name):] if name in spenders else [name]
    share = left * STAT_SECONDS_SHARE.get(name, 1.0) / sum(STAT_SECONDS_SHARE.get(n, 1.0) for n in later)
    floor = TIME_SIZED_FLOOR * per_request
    return max(share, floor) if floor <= fixed else min(share, fixed)


def _positive_cells(law: np.ndarray) -> int:
    return int(np.count_nonzero(np.asarray(law) > 0))


def samples_needed(ctx: RunContext, positive_cells: int) -> int:
    """n for ``profile.stat_tv`` at power 0.999 and the assertion alpha, within [MIN_SAMPLES, cap];
    a deterministic law (one positive cell) takes MIN_SAMPLES. A cap below MIN_SAMPLES (an explicit
    override for a slow kernel) wins in both cases: the record's detectable TV states what is left."""
    if positive_cells < 2:
        return min(MIN_SAMPLES, _sample_cap(ctx))
    n = stats.samples_for_tv(ctx.profile.stat_tv, positive_cells, assertion_alpha(ctx.profile))
    return int(min(max(n, MIN_SAMPLES), _sample_cap(ctx)))


def _detectable_tv(fit: stats.FitResult, alpha: float) -> float:
    """TV detectable at power 0.999: the chi-square bound, or for a one-cell (deterministic) law the
    mass ``d`` moved off the cell that shows at least once with probability 0.999 (certain failure)."""
    if fit.cells >= 2:
        return stats.detectable_tv(fit.n, fit.cells, alpha)
    return -math.log1p(-stats.DEFAULT_POWER) / max(fit.n, 1)


def _repro(ctx: RunContext, prop: str) -> str:
    return (
        f"python -m harness check --kernel {ctx.kernel_spec or '<spec>'} --profile {ctx.profile.name} "
        f"--device {ctx.device.type} --seed {ctx.seed} --only {prop}"
    )


def _stat_record(outcome: stats.Confirmed, alpha: float, **fields) -> StatRecord:
    """The StatRecord of a confirmed assertion: level, power, and whether it rejected / was confirmed."""
    return StatRecord(
        alpha=alpha,
        power=stats.DEFAULT_POWER,
        rejected=outcome.first.rejects(alpha),
        confirmed=None if outcome.confirmation is None else outcome.failed,
        **fields,
    )


def law_assertion(
    ctx: RunContext,
    name: str,
    draw_counts: Callable[[int, int], np.ndarray],
    probabilities: np.ndarray,
    labels: list,
    prop: str,
    n: int,
    case: dict | None = None,
) -> tuple[StatRecord, Finding | None]:
    """Goodness of fit of ``draw_counts(seed_root, n)`` (counts over the cells of ``probabilities``
    plus a final contract-violation cell) against the exact law, with confirmation."""
    alpha = assertion_alpha(ctx.profile)
    expected = np.append(np.asarray(probabilities, dtype=np.float64), 0.0)
    labels = list(labels) + ["contract violation"]
    seeds = (ctx.child_seed(prop, name, "first"), ctx.child_seed(prop, name, "confirm"))
    last_counts = {}

    def run(seed: int, size: int) -> stats.FitResult:
        last_counts["counts"] = counts = np.asarray(draw_counts(seed, size))
        return stats.goodness_of_fit(counts, expected, labels)

    outcome = stats.confirm_rejection(run, n, seeds, alpha)
    fit = outcome.final
    record = _stat_record(
        outcome,
        alpha,
        name=name,
        n=fit.n,
        cells=fit.cells,
        statistic=fit.statistic,
        p_value=fit.p_value,
        detectable_tv=_detectable_tv(fit, alpha),
        observed=fit.observed,
        expected=fit.expected,
        labels=[str(x) for x in fit.labels],
    )
    if not outcome.failed:
        return record, None
    if fit.impossible:
        worst = [str(labels[i]) for i in np.flatnonzero((expected == 0) & (last_counts["counts"] > 0))][:5]
        message = (
            f"{name}: {fit.impossible} of {fit.n} outcomes have exact probability 0 "
            f"(certain failure){': ' + ', '.join(worst) if worst else ''}"
        )
        cls = "impossible_outcome"
    else:
        message = (
            f"{name}: law rejected twice (p = {outcome.first.p_value:.3g}, then {fit.p_value:.3g} with "
            f"4x fresh samples; alpha {alpha:.2g}, detects TV >= {record.detectable_tv:.3g})"
        )
        cls = "law_rejected"
    finding = Finding(
        cls=cls,
        first_field="(tau, Y)" if prop == "conditional_law" else "output_token_ids",
        message=message,
        case=case or {},
        evidence={
            "statistic": fit.statistic,
            "p_value": fit.p_value,
            "alpha": alpha,
            "n": fit.n,
            "power": stats.DEFAULT_POWER,
            "detectable_tv": record.detectable_tv,
        },
        repro=_repro(ctx, prop),
    )
    return record, finding


def _case_of(batch: VerifyBatch) -> dict:
    try:
        from harness.generation.cases import case_from_batch

        return case_from_batch(batch.to("cpu")).to_dict()
    except Exception:  # the case is evidence only; never let it mask the finding
        return {}


class _Suite:
    """A statistical property's assertions, counted for ``ctx.progress`` and cut at the property's
    deadline (``check --budget``, harness/timing/budget.py): ``each(items)`` stops yielding once the
    deadline has passed, and ``cut`` says so."""

    def __init__(self, ctx: RunContext, name: str, planned: int):
        self.ctx, self.planned, self.done, self.cut = ctx, planned, 0, False
        ctx.progress.start(name, planned, "assertions")

    def each(self, items):
        for item in items:
            if self.cut or deadline_passed(self.ctx):
                self.cut = True
                return
            yield item
            self.done += 1
            self.ctx.progress.advance(self.done)


def _result(
    name: str, started: float, records: list, findings: list, cases: int, note: str = "",
    suite: _Suite | None = None,
) -> PropertyResult:
    verdict = FAIL if findings else PASS if records else SKIPPED  # no assertion made: never a "pass"
    if suite is not None:
        suite.ctx.progress.finish()
        if suite.cut and not findings:  # assertions it did not reach were not made: never a "pass"
            verdict = SKIPPED
            note = budget_note(suite.done, suite.planned, "assertions", time.perf_counter() - started)
    if not records and not note:
        note = "no statistical assertion applies to this kernel"
    return PropertyResult(
        name=name,
        layer=4,
        verdict=verdict,
        cases=cases,
        seconds=time.perf_counter() - started,
        statistics=records,
        failures=findings,
        note=note,
    )


class _Statistical:
    layer = 4

    def not_claimed_reason(self, kernel: object) -> str | None:
        return None if getattr(kernel, "methods", None) else "the kernel declares no methods"

    def claimed(self, kernel: object) -> bool:
        return self.not_claimed_reason(kernel) is None


# -- conditional law ---------------------------------------------------------------------------
def _conditional_cell(vocab: int, k: int, draft_ids: torch.Tensor):
    def cell_of(out: VerifyOutput, batch: VerifyBatch, aux) -> torch.Tensor:
        ids = (
            draft_ids.expand(out.num_emitted.numel(), k)
            if k
            else draft_ids.new_zeros(out.num_emitted.numel(), 0)
        )
        tau = emitted_tau(out, ids, k, vocab)
        cell = tau * vocab + final_token(out, tau)
        return torch.where(tau >= 0, cell, (k + 1) * vocab)

    return cell_of


class ConditionalLaw(_Statistical):
    name = "conditional_law"

    def run(self, kernel: object, ctx: RunContext) -> PropertyResult:
        started = time.perf_counter()
        caps = capabilities_of(kernel)
        records, findings, cases = [], [], 0
        requests = [
            r
            for r in fixed_draft_requests(ctx.rng(self.name, "requests"), caps.dtypes, caps.min_temperature)
            if (caps.point_mass_drafts if r.draft is None else caps.draft_logits)
            and (r.temperature != 0 or caps.greedy)
            # under an "any maximum" tie rule a tied greedy row has no law (any split over its maxima)
            and not (r.label == "greedy_ties" and caps.greedy_ties == "any")
        ]
        pairs = [(r, m) for r in requests for m in sorted(kernel.methods)]
        plan = sized_samples(
            kernel, ctx, self.name,
            [samples_needed(ctx, _positive_cells(conditional_law(r.target, r.draft, r.ids, r.temperature, m)))
             for r, m in pairs],
            [f"{r.label}/{m}" for r, m in pairs], started)
        if isinstance(plan, PropertyResult):
            return plan
        planned = [(r, m, n) for (r, m), n in zip(pairs, plan.sizes, strict=True) if n]
        suite = _Suite(ctx, self.name, len(planned))
        for request, method, n in suite.each(planned):
            record, finding = self._assert(kernel, ctx, request, method, n)
            records.append(record)
            cases += 1
            if finding:
                findings.append(finding)
                if ctx.fail_fast:
                    break
        return _result(self.name, started, records, findings, cases, plan.note, suite)

    def _assert(self, kernel, ctx, request: FixedDraftRequest, method: str, n: int):
        base = request.batch(method, ctx.device)
        vocab, k = request.vocab, request.gamma
        law = conditional_law(request.target, request.draft, request.ids, request.temperature, method)
        labels = [f"tau={i},y={y}" for i in range(k + 1) for y in range(vocab)]
        cell_of = _conditional_cell(vocab, k, base.draft_token_ids.view(1, k))

        def draw(seed: int, n: int) -> np.ndarray:
            return count_cells(kernel, replicated_batches(base, n, seed), cell_of, (k + 1) * vocab).numpy()

        return law_assertion(
            ctx, f"{request.label}/{method}", draw, law.ravel(), labels, self.name, n, _case_of(base)
        )


# -- marginal law over sampled drafts ----------------------------------------------------------
def _sequence_cells(vocab: int, gamma: int) -> tuple[np.ndarray, list]:
    """Cell offsets per output length (1..g+1) and labels 'prefix|y' for every possible output."""
    offsets = np.concatenate(([0], np.cumsum(vocab ** np.arange(1, gamma + 2))))
    labels = []
    for length in range(1, gamma + 2):
        for code in range(vocab**length):
            digits = np.base_repr(code, vocab).zfill(length) if vocab > 1 else "0" * length
            labels.append(f"{digits[:-1]}|{digits[-1]}")
    return offsets, labels


def marginal_law_vector(pair: ModelPair, method: str) -> tuple[np.ndarray, np.ndarray, list]:
    """Exact output law as a vector over sequence cells, the tau of each cell, and labels."""
    offsets, labels = _sequence_cells(pair.vocab, pair.gamma)
    probs = np.zeros(int(offsets[-1]))
    taus = np.zeros(int(offsets[-1]), dtype=np.int64)
    for length in range(1, pair.gamma + 2):
        taus[offsets[length - 1] : offsets[length]] = length - 1
    for (prefix, y), p in output_law(pair.target_model, pair.draft_model, pair.gamma, method).items():
        code = 0
        for x in (*prefix, y):
            code = code * pair.vocab + int(x)
        probs[offsets[len(prefix)] + code] = float(p)
    return probs / probs.sum(), taus, labels


def _model_pair_batches(pair: ModelPair, method: str, n: int, seed_root: int, device: torch.device):
    """Batches whose requests each carry a draft sampled from the draft model (torch, on ``device``),
    with the target/draft rows of every prefix."""
    vocab, gamma = pair.vocab, pair.gamma
    offsets = torch.as_tensor(pair.offsets(), device=device)
    target_table = torch.from_numpy(pair.target_table).to(device)
    draft_table = torch.from_numpy(pair.draft_table).to(device)
    draft_probs = torch.softmax(draft_table.double() / pair.temperature, dim=-1)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed_root)
    size = batch_size(device, 2 * gamma + 1, vocab, n)
    done = 0
    while done < n:
        count = min(size, n - done)
        code = torch.zeros(count, dtype=torch.int64, device=device)
        target_rows, draft_rows, drafts = [], [], []
        for i in range(gamma):
            row = offsets[i] + code
            target_rows.append(row)
            draft_rows.append(row)
            x = torch.multinomial(draft_probs[row], 1, generator=gen)[:, 0]
            drafts.append(x)
            code = code * vocab + x
        target_rows.append(offsets[gamma] + code)
        target_index = torch.stack(target_rows, dim=1).reshape(-1)
        draft_ids = (
            torch.stack(drafts, dim=1) if gamma else torch.zeros(count, 0, dtype=torch.int64, device=device)
        )
        batch = VerifyBatch(
            target_logits=target_table[target_index],
            draft_logits=draft_table[torch.stack(draft_rows, dim=1).reshape(-1)]
            if gamma
            else torch.zeros(0, vocab, device=device),
            draft_token_ids=draft_ids.reshape(-1),
            cu_num_draft_tokens=torch.arange(count + 1, dtype=torch.int32, device=device) * gamma,
            temperature=torch.full((count,), pair.temperature, dtype=torch.float32, device=device),
            seeds=seed_block(seed_root, done, count, device),
            positions=torch.full((count,), 1000, dtype=torch.int64, device=device),
            method=method,
        )
        yield batch, draft_ids
        done += count


def _sequence_cell_of(vocab: int, gamma: int):
    offsets = torch.as_tensor(np.concatenate(([0], np.cumsum(vocab ** np.arange(1, gamma + 2)))))
    num_cells = int(offsets[-1])

    def cell_of(out: VerifyOutput, batch: VerifyBatch, draft_ids: torch.Tensor) -> torch.Tensor:
        tau = emitted_tau(out, draft_ids, gamma, vocab)
        ids = out.output_token_ids.to(torch.int64)[:, : gamma + 1].clamp(0, vocab - 1)
        code = torch.zeros_like(tau)
        for j in range(gamma + 1):
            code = torch.where(j <= tau, code * vocab + ids[:, j], code)
        cell = offsets.to(tau.device)[tau.clamp(min=0)] + code
        return torch.where(tau >= 0, cell, num_cells)

    return cell_of, num_cells


def marginal_counts(kernel, ctx: RunContext, pair: ModelPair, method: str, seed: int, n: int) -> np.ndarray:
    """Counts over sequence cells (+ contract-violation cell); shared by the marginal-law and E[tau]
    properties of one run through ``ctx.extra`` so the same draws are not paid for twice."""
    cache = ctx.extra.setdefault("statistical_marginal_counts", {})
    key = (id(kernel), pair.label, method, seed, n)
    if key not in cache:
        cell_of, num_cells = _sequence_cell_of(pair.vocab, pair.gamma)
        batches = _model_pair_batches(pair, method, n, seed, ctx.device)
        cache[key] = count_cells(kernel, batches, cell_of, num_cells).numpy()
    return cache[key]


def _pairs(ctx: RunContext) -> list[ModelPair]:
    return model_pairs(ctx.rng("statistical", "model_pairs"), ctx.profile.max_draft)


class _SampledDrafts(_Statistical):
    """Drafts sampled from a draft model, handed over as its logits: claimed by kernels that accept
    draft logits (a target-only verifier has no draft distribution to verify against)."""

    def not_claimed_reason(self, kernel: object) -> str | None:
        if not capabilities_of(kernel).draft_logits:
            return "the kernel does not accept draft logits (drafts sampled from a draft model need them)"
        return super().not_claimed_reason(kernel)


class MarginalLaw(_SampledDrafts):
    name = "marginal_law"

    def run(self, kernel: object, ctx: RunContext) -> PropertyResult:
        started = time.perf_counter()
        records, findings = [], []
        plan = marginal_plan(kernel, ctx, self.name, started)
        if isinstance(plan, PropertyResult):
            return plan
        suite = _Suite(ctx, self.name, len(plan))
        for pair, method, n in suite.each(plan.items):
            probs, _, labels = marginal_law_vector(pair, method)
            draw = lambda seed, size, pair=pair, method=method: marginal_counts(
                kernel, ctx, pair, method, seed, size
            )
            record, finding = law_assertion(
                ctx, f"{pair.label}/{method}", draw, probs, labels, self.name, n,
                {"model_pair": pair.label, "method": method},
            )
            records.append(record)
            findings += [finding] if finding else []
        return _result(self.name, started, records, findings, len(records), plan.note, suite)


# -- E[tau] and block >= token ----------------------------------------------------------------
def _marginal_n(ctx: RunContext, pair: ModelPair, method: str) -> int:
    probs, _, _ = marginal_law_vector(pair, method)
    return samples_needed(ctx, _positive_cells(probs))


@dataclass
class MarginalPlan:
    """Samples per (model pair, method) of the marginal-law draws, shared by ``marginal_law``,
    ``expected_accepted`` and ``block_dominates_token`` (the latter two reuse the first's draws):
    the same ``sized_samples`` plan in each, so their first stages hit ``marginal_counts``' cache."""

    sizes: dict
    note: str
    pairs: list

    @property
    def items(self) -> list[tuple[ModelPair, str, int]]:
        return [(p, m, self.sizes[p.label, m]) for p in self.pairs for m in ("token", "block")
                if self.sizes.get((p.label, m))]

    def __len__(self) -> int:
        return len(self.items)


def marginal_plan(
    kernel: object, ctx: RunContext, name: str, started: float
) -> MarginalPlan | PropertyResult:
    """``sized_samples`` over every (model pair, method the kernel declares), deepest pair and token
    first, at ``marginal_law``'s seconds whichever of the three properties asks (the same plan)."""
    pairs = sorted(_pairs(ctx), key=lambda p: -p.gamma)  # deepest first: slot bugs compound with depth
    keys = [(p, m) for p in pairs for m in sorted(kernel.methods, reverse=True)]

    def probe() -> float:  # the deepest pair has more rows per request than the pilot (9 vs 7)
        cell_of, num_cells = _sequence_cell_of(pairs[0].vocab, pairs[0].gamma)
        return timed_probe(lambda: count_cells(
            kernel, _model_pair_batches(pairs[0], keys[0][1], PROBE_REQUESTS, 0, ctx.device),
            cell_of, num_cells), ctx.device)

    cache = ctx.extra.setdefault("statistical_marginal_probe", {})  # one probe for the three properties
    timed = lambda: cache[id(kernel)] if id(kernel) in cache else cache.setdefault(id(kernel), probe())  # noqa: E731
    # One plan for the three: with check's window the seconds left differ when each asks, and E[tau]
    # and block >= token must reuse marginal's draws, not draw fewer of their own.
    plans = ctx.extra.setdefault("statistical_marginal_plan", {})
    plan = plans.get(id(kernel))
    if plan is None or isinstance(plan, PropertyResult):
        plan = sized_samples(kernel, ctx, "marginal_law", [_marginal_n(ctx, p, m) for p, m in keys],
                             [f"{p.label}/{m}" for p, m in keys], started, timed)
        plans[id(kernel)] = plan
    if isinstance(plan, PropertyResult):
        plan.name = name
        return plan
    sizes = {(p.label, m): n for (p, m), n in zip(keys, plan.sizes, strict=True)}
    return MarginalPlan(sizes, plan.note, pairs)


def _tau_sums(counts: np.ndarray, taus: np.ndarray) -> tuple[float, int, int]:
    """(sum of tau, valid samples, contract violations) from sequence-cell counts."""
    valid = counts[:-1]
    return float((valid * taus).sum()), int(valid.sum()), int(counts[-1])


class ExpectedAccepted(_SampledDrafts):
    name = "expected_accepted"

    def run(self, kernel: object, ctx: RunContext) -> PropertyResult:
        started = time.perf_counter()
        alpha = assertion_alpha(ctx.profile)
        records, findings = [], []
        plan = marginal_plan(kernel, ctx, self.name, started)
        if isinstance(plan, PropertyResult):
            return plan
        suite = _Suite(ctx, self.name, len(plan))
        for pair, method, n in suite.each(plan.items):
            law = output_law(pair.target_model, pair.draft_model, pair.gamma, method)
            mean = expected_accepted(law, gamma=pair.gamma)
            var = accepted_variance(law, gamma=pair.gamma)
            _, taus, _ = marginal_law_vector(pair, method)
            label = f"{pair.label}/{method}"

            def run_once(seed: int, n: int, pair=pair, method=method, mean=mean, var=var, taus=taus):
                total, valid, _ = _tau_sums(marginal_counts(kernel, ctx, pair, method, seed, n), taus)
                return stats.mean_test(total, max(valid, 1), mean, var, pair.gamma, alpha)

            seeds = (
                ctx.child_seed("marginal_law", label, "first"),
                ctx.child_seed(self.name, label, "confirm"),
            )
            outcome = stats.confirm_rejection(run_once, n, seeds, alpha)
            res = outcome.final
            records.append(
                _stat_record(
                    outcome,
                    alpha,
                    name=f"E[tau] {label}",
                    n=res.n,
                    cells=pair.gamma + 1,
                    statistic=res.statistic,
                    p_value=res.p_value,
                    detectable_tv=float(res.detectable_shift / pair.gamma),  # TV d moves E[tau] <= d * g
                    observed=[res.sample_mean],
                    expected=[res.exact_mean],
                    labels=["E[tau]"],
                )
            )
            if outcome.failed:
                findings.append(
                    Finding(
                        cls="mean_rejected",
                        first_field="num_emitted",
                        message=(
                            f"E[tau] {label}: sample mean {res.sample_mean:.4f} vs exact {mean:.4f} "
                            f"(n = {res.n}, Bernstein p = {res.p_value:.3g}, alpha {alpha:.2g}; "
                            f"detectable shift {res.detectable_shift:.3g}); confirmed with 4x fresh "
                            "samples"
                        ),
                        case={"model_pair": pair.label, "method": method},
                        evidence={
                            "sample_mean": res.sample_mean,
                            "exact_mean": mean,
                            "variance": var,
                            "n": res.n,
                            "p_value": res.p_value,
                            "alpha": alpha,
                        },
                        repro=_repro(ctx, self.name),
                    )
                )
        return _result(self.name, started, records, findings, len(records), plan.note, suite)


class _DifferenceOutcome:
    """One-sided Bernstein test of ``E_block - E_token >= 0`` from two independent sample means."""

    def __init__(self, block: tuple, token: tuple, var_block: float, var_token: float, gamma: int):
        (sb, nb), (st, nt) = block, token
        self.n = nb + nt
        self.difference = sb / nb - st / nt
        spread = var_block / nb + var_token / nt
        gap = max(0.0, -self.difference)
        bound = gamma / min(nb, nt)
        self.p_value = (
            1.0 if gap == 0 else min(1.0, math.exp(-gap * gap / (2 * spread + 2 * bound * gap / 3)))
        )
        self.spread, self.bound = spread, bound

    def rejects(self, alpha: float) -> bool:
        return self.p_value <= alpha

    def detectable_deficit(self, alpha: float, power: float = stats.DEFAULT_POWER) -> float:
        """Smallest ``E_token - E_block > 0`` rejected with probability >= ``power``: the gap where the
        one-sided Bernstein bound reaches ``alpha``, plus the ``power`` quantile of the noise."""
        log_term = math.log(1.0 / alpha)
        b = 2.0 * self.bound * log_term / 3.0
        threshold = (b + math.sqrt(b * b + 8.0 * self.spread * log_term)) / 2.0
        return threshold + float(norm.isf(1 - power)) * math.sqrt(self.spread)


class BlockDominatesToken(_Statistical):
    name = "block_dominates_token"

    def not_claimed_reason(self, kernel: object) -> str | None:
        methods = set(getattr(kernel, "methods", ()))
        if {"token", "block"} <= methods:
            return None
        return f"the kernel does not implement both methods (it declares {sorted(methods)})"

    def run(self, kernel: object, ctx: RunContext) -> PropertyResult:
        unclaimed = unclaimed_result(self, kernel)  # never send a method the kernel does not declare
        if unclaimed:
            return unclaimed
        started = time.perf_counter()
        alpha = assertion_alpha(ctx.profile)
        records, findings = [], []
        plan = marginal_plan(kernel, ctx, self.name, started)
        if isinstance(plan, PropertyResult):
            return plan
        pairs = [p for p in plan.pairs if all(plan.sizes.get((p.label, m)) for m in ("block", "token"))]
        suite = _Suite(ctx, self.name, len(pairs))
        for pair in suite.each(pairs):
            laws = {
                m: output_law(pair.target_model, pair.draft_model, pair.gamma, m) for m in ("block", "token")
            }
            exact = {m: expected_accepted(laws[m], gamma=pair.gamma) for m in laws}
            var = {m: accepted_variance(laws[m], gamma=pair.gamma) for m in laws}
            taus = {m: marginal_law_vector(pair, m)[1] for m in laws}
            n = {m: plan.sizes[pair.label, m] for m in laws}

            seeds = (
                ctx.child_seed(self.name, pair.label, "first"),
                ctx.child_seed(self.name, pair.label, "confirm"),
            )

            def run_once(seed: int, size: int, pair=pair, seeds=seeds, n=n, taus=taus, var=var):
                # The first stage reuses the marginal-law draws; the confirmation draws afresh, 4x.
                first = seed == seeds[0]
                sums = {}
                for m in ("block", "token"):
                    seed_m = (
                        ctx.child_seed("marginal_law", f"{pair.label}/{m}", "first")
                        if first
                        else ctx.child_seed(self.name, pair.label, m, seed)
                    )
                    counts = marginal_counts(kernel, ctx, pair, m, seed_m, n[m] if first else 4 * n[m])
                    total, valid, _ = _tau_sums(counts, taus[m])
                    sums[m] = (total, max(valid, 1))
                return _DifferenceOutcome(
                    sums["block"], sums["token"], var["block"], var["token"], pair.gamma
                )

            outcome = stats.confirm_rejection(run_once, n["block"], seeds, alpha)
            res = outcome.final
            records.append(
                _stat_record(
                    outcome,
                    alpha,
                    name=f"E_block - E_token {pair.label}",
                    n=res.n,
                    cells=2,
                    statistic=res.difference,
                    p_value=res.p_value,
                    detectable_tv=res.detectable_deficit(alpha) / pair.gamma,  # as for E[tau]
                    observed=[res.difference],
                    expected=[exact["block"] - exact["token"]],
                    labels=["E_block[tau] - E_token[tau]"],
                )
            )
            if outcome.failed:
                findings.append(
                    Finding(
                        cls="block_loses_on_average",
                        first_field="num_emitted",
                        message=(
                            f"{pair.label}: E_block - E_token = {res.difference:.4f} < 0 significantly "
                            f"(p = {res.p_value:.3g}, alpha {alpha:.2g}; exact difference "
                            f"{exact['block'] - exact['token']:.4f}); confirmed with 4x fresh samples"
                        ),
                        case={"model_pair": pair.label},
                        evidence={"difference": res.difference, "p_value": res.p_value},
                        repro=_repro(ctx, self.name),
                    )
                )
        return _result(self.name, started, records, findings, len(records), plan.note, suite)


# -- first emitted token on large vocabularies -------------------------------------------------
def _first_token_batches(row: LargeVocabRow, method: str, n: int, seed_root: int, device: torch.device):
    vocab = row.target.shape[1]
    target = torch.from_numpy(row.target).to(device)
    draft = None if row.draft is None else torch.from_numpy(row.draft).to(device)
    q = None if draft is None else torch.softmax(draft[0].double() / row.temperature, dim=-1)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed_root)
    size = batch_size(device, 3, vocab, n)
    done = 0
    while done < n:
        count = min(size, n - done)
        if q is None:
            ids = torch.full((count,), row.point_mass_id, dtype=torch.int64, device=device)
        else:
            ids = torch.multinomial(q, count, replacement=True, generator=gen)
        batch = VerifyBatch(
            target_logits=tiled(target, count),  # tiled: a supervised call ships one row, not 2 GiB
            draft_logits=None if draft is None else tiled(draft, count),
            draft_token_ids=ids,
            cu_num_draft_tokens=torch.arange(count + 1, dtype=torch.int32, device=device),
            temperature=torch.full((count,), row.temperature, dtype=torch.float32, device=device),
            seeds=seed_block(seed_root, done, count, device),
            positions=torch.full((count,), 77, dtype=torch.int64, device=device),
            method=method,
        )
        yield batch, ids[:, None]
        done += count


def first_token_bins(row: LargeVocabRow) -> tuple[np.ndarray, np.ndarray]:
    """``bins [V]`` (-1 for probability-0 tokens) and the exact law over the bins plus a final
    zero-probability cell, for the target row that judges the first draft."""
    scaled = row.target[0].astype(np.float64) / row.temperature
    b = np.exp(scaled - np.max(scaled))
    b /= b.sum()
    bins = equal_mass_bins(b, FIRST_TOKEN_BINS)
    num_bins = int(bins.max()) + 1
    probs = np.bincount(bins[bins >= 0], weights=b[bins >= 0], minlength=num_bins)
    return bins, np.append(probs, 0.0)


class FirstTokenLaw(_Statistical):
    name = "first_token_law"

    def run(self, kernel: object, ctx: RunContext) -> PropertyResult:
        started = time.perf_counter()
        caps = capabilities_of(kernel)
        vocab = int(min(ctx.profile.max_vocab, caps.max_vocab))
        rows = [
            r
            for r in large_vocab_rows(ctx.rng(self.name, "rows"), vocab)
            if (caps.point_mass_drafts if r.draft is None else caps.draft_logits)
        ]
        laws = [first_token_bins(r) for r in rows]
        keys = [(k, m) for k in range(len(rows)) for m in sorted(kernel.methods)]

        def probe() -> float:
            method = sorted(kernel.methods)[0]
            return timed_probe(lambda: count_cells(
                kernel, _first_token_batches(rows[0], method, PROBE_REQUESTS, 0, ctx.device),
                lambda o, b, a: o.num_emitted * 0, 1), ctx.device)

        plan = sized_samples(kernel, ctx, self.name,
                             [samples_needed(ctx, _positive_cells(laws[k][1])) for k, _ in keys],
                             [f"{rows[k].label}/{m}" for k, m in keys], started, probe if rows else None)
        if isinstance(plan, PropertyResult):
            return plan
        planned = [(k, m, n) for (k, m), n in zip(keys, plan.sizes, strict=True) if n]
        records, findings = [], []
        suite = _Suite(ctx, self.name, len(planned))
        for k, method, n in suite.each(planned):
            row, (bins, probs) = rows[k], laws[k]
            num_bins = probs.size - 1
            labels = [f"bin {i}" for i in range(num_bins)] + ["p=0 tokens"]
            token_cell = torch.from_numpy(np.where(bins >= 0, bins, num_bins)).to(ctx.device)

            def cell_of(out: VerifyOutput, batch: VerifyBatch, draft_ids, token_cell=token_cell, nb=num_bins):
                tau = emitted_tau(out, draft_ids, 1, vocab)
                first = out.output_token_ids.to(torch.int64)[:, 0].clamp(0, vocab - 1)
                return torch.where(tau >= 0, token_cell[first], nb + 1)

            draw = lambda seed, size, row=row, method=method, cell_of=cell_of, nb=num_bins: count_cells(
                kernel, _first_token_batches(row, method, size, seed, ctx.device), cell_of, nb + 1
            ).numpy()
            record, finding = law_assertion(
                ctx, f"{row.label}/V={vocab}/{method}", draw, probs, labels, self.name, n,
                {"row": row.label, "vocab": vocab, "method": method},
            )
            records.append(record)
            findings += [finding] if finding else []
        return _result(self.name, started, records, findings, len(records), plan.note, suite)


STATISTICAL_PROPERTIES = [
    register(p)
    for p in (ConditionalLaw(), MarginalLaw(), FirstTokenLaw(), ExpectedAccepted(), BlockDominatesToken())
]
