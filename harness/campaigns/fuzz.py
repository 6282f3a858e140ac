"""Fuzz campaigns: every claimed property, until a time budget is spent, sharded deterministically.

``python -m harness fuzz --kernel SPEC --budget 2h [--shard I/N] [--seed N] [--profile P]
[--report DIR] [--corpus DIR | --no-save] [--only PROPERTY ...]``

How the work is split. The campaign is an endless sequence of work items ``(round, property)``
enumerated in a fixed order (properties sorted by name, rounds 0, 1, 2, ...). Shard ``I/N`` takes the
items whose index is ``I`` modulo ``N``; each item draws its randomness from
``(seed, round, property)`` only. So N shards started with the same ``--seed`` do disjoint work whose
union is what one process would do with N times the budget, and every report names its seed and
shard so any item can be rerun. Without ``--seed`` a fresh seed is drawn and printed.

One item of a case-by-case property (``CaseProperty``: layers 1, 2, 3, 5) is a Hypothesis search
(``profile.max_examples`` examples, fresh seed, no database) whose examples are steered with
``hypothesis.target`` toward what finds bugs: oracle decisions close to their thresholds (small tie
margins), large vocabularies, long drafts, many requests. A finding whose key
``(property, class, first field)`` (``harness.campaigns.merge.failure_key``) is new is shrunk to a minimal
case (bounded by ``profile.shrink_calls`` / ``shrink_seconds``), confirmed by checking the minimal
case once more, saved to the regression corpus and reported; a known key only counts an occurrence.
Other properties (layer 4 statistics) run whole with the item's fresh seed (their inputs come from
their own seeded generators, so ``target`` does not steer them); a whole run is started only if the
previous run of that property fits in the time left. Kernel calls run in a supervised worker
(harness/execution/supervisor.py; ``--in-process`` turns that off): a crash or hang is a ``crash`` / ``hang``
finding like any other (shrunk with each crashing try in a fresh worker, saved, deduplicated), its
``repro`` replays the saved case in the foreground, and the campaign goes on. In process, a device
fault (corrupted CUDA context) ends the campaign early, with the report written.

Many GPUs of one host: ``--parallel N --gpus 0,1,..`` starts N shard processes (one
``CUDA_VISIBLE_DEVICES`` each) and merges their reports; many hosts: run ``--shard I/N --seed S`` per
job and ``python -m harness merge`` the report directories.

Outputs: ``report.json`` (schema ``specfuzz-report/1`` plus ``budget_s``, ``cases_per_hour``) and
``report.html`` in ``--report``; one progress line per item on stderr. Exit 0 when nothing failed,
1 when anything failed, 2 on a usage error.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.campaigns.merge import failure_key
from harness.contract import KernelNotReady, prepare_kernel
from harness.execution.kernel_calls import KernelFault
from harness.plugins import DEFAULT_KERNEL_SPEC as DEFAULT_KERNEL  # one default for every command
from harness.properties.base import (
    ERROR,
    FAIL,
    NOT_CLAIMED,
    PASS,
    SKIPPED,
    Finding,
    PropertyResult,
    RunContext,
)
from harness.timing.budget import DEADLINE_KEY

MARGIN_ELEMENT_CAP = 1 << 22  # oracle margins are computed (for guidance) only for batches this small
_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*$")


class UsageError(Exception):
    pass


def parse_duration(text: str) -> float:
    """Seconds in ``"90"``, ``"90s"``, ``"15m"``, ``"2h"``, ``"1h30m"``; must be positive."""
    m = _DURATION.match(str(text))
    if not m or not any(m.groups()):
        raise UsageError(f"budget {text!r} is not a duration like 90s, 15m, 2h or 1h30m")
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    seconds = 3600 * h + 60 * mi + s
    if seconds <= 0:
        raise UsageError(f"budget {text!r} must be positive")
    return seconds


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` with ``0 <= I < N``."""
    try:
        i, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise UsageError(f"shard {text!r} must look like I/N, e.g. 0/4") from None
    if n < 1 or not 0 <= i < n:
        raise UsageError(f"shard {text!r} needs 0 <= I < N")
    return i, n


def work_items(property_names: list[str], shard: tuple[int, int]):
    """This shard's endless, deterministic sequence of ``(round, property)`` items."""
    names = sorted(property_names)
    if not names:
        return
    i, n = shard
    index = i
    while True:
        yield index // len(names), names[index % len(names)]
        index += n


# ----------------------------------------------------------------------------------------------------
# Guidance: what hypothesis.target maximises for one case
# ----------------------------------------------------------------------------------------------------
def guidance_scores(case, margins_fn=None) -> dict[str, float]:
    """Scores to maximise: size extremes always; closeness to a decision threshold when computable.

    ``margins_fn(case) -> iterable of float`` gives the oracle's decision margins (None: skip). The
    tie score is ``-log10(min |margin|)``, large when some decision is nearly a tie.
    """
    scores = {
        "log2_vocab": math.log2(max(1, case.vocab_size)),
        "draft_tokens": float(sum(case.draft_lens)),
        "requests": float(len(case.draft_lens)),
    }
    if margins_fn is not None:
        finite = [abs(float(m)) for m in margins_fn(case) if m == m and math.isfinite(float(m))]
        if finite:
            scores["tie_closeness"] = -math.log10(max(min(finite), 1e-30))
    return scores


def oracle_margins(case) -> list[float]:
    """Every decision margin the oracle reports for ``case`` under the reference randomness."""
    from harness.generation.cases import build_batch
    from harness.judging.oracle import reference_draws, run_reference

    if case.vocab_size * (sum(case.draft_lens) + len(case.draft_lens)) > MARGIN_ELEMENT_CAP:
        return []
    batch = build_batch(case, "cpu")
    accept, sample = reference_draws(batch)
    result = run_reference(batch, accept, sample)
    return [*result.accept_margins.tolist(), *result.sample_margins.tolist()]


# ----------------------------------------------------------------------------------------------------
# Accepted-length distributions for the report (SPEC.md golden toy example)
# ----------------------------------------------------------------------------------------------------
TOY_TARGET, TOY_DRAFT = (1 / 3, 2 / 3), (2 / 3, 1 / 3)  # M_b, M_s at every position, V = 2, g = 2
TOY_EXACT = {"token": [1 / 3, 2 / 9, 4 / 9], "block": [1 / 3, 1 / 9, 5 / 9]}


def measure_acceptance(kernel, device, seed: int, requests: int) -> dict:
    """Empirical ``P(tau = 0, 1, 2)`` of each claimed method on Sun et al.'s toy example.

    ``requests`` replicas, drafts sampled from ``M_s`` with a seeded generator, fresh request seeds;
    returns ``{"acceptance": {method: [...]}, "acceptance_exact": {...}, "acceptance_n": requests}``.
    """
    import numpy as np
    import torch

    from harness.contract import VerifyBatch
    from harness.execution.kernel_calls import call_verify

    rng = np.random.default_rng(seed)
    g = 2
    target = torch.tensor(np.log(TOY_TARGET), dtype=torch.float32).repeat(requests * (g + 1), 1)
    draft = torch.tensor(np.log(TOY_DRAFT), dtype=torch.float32).repeat(requests * g, 1)
    ids = torch.from_numpy((rng.random(requests * g) >= TOY_DRAFT[0]).astype(np.int64))
    seeds = torch.from_numpy(rng.integers(0, 2**62, size=requests, dtype=np.int64))
    measured = {}
    for method in sorted(set(getattr(kernel, "methods", ())) & set(TOY_EXACT)):
        batch = VerifyBatch(
            target.to(device),
            draft.to(device),
            ids.to(device),
            torch.arange(requests + 1, dtype=torch.int32, device=device) * g,
            torch.ones(requests, dtype=torch.float32, device=device),
            seeds.to(device),
            torch.zeros(requests, dtype=torch.int64, device=device),
            method=method,
        )
        tau = call_verify(kernel, batch).num_emitted.to("cpu").long() - 1
        measured[method] = (torch.bincount(tau.clamp(0, g), minlength=g + 1).double() / requests).tolist()
    return {
        "acceptance": measured,
        "acceptance_exact": {m: TOY_EXACT[m] for m in measured},
        "acceptance_n": requests,
    }


# ----------------------------------------------------------------------------------------------------
# The campaign
# ----------------------------------------------------------------------------------------------------
@dataclass
class PropertyTally:
    """What the campaign learned about one property across all its items."""

    name: str
    layer: int
    verdict: str = PASS
    cases: int = 0
    seconds: float = 0.0
    ties: int = 0
    statistics: list = field(default_factory=list)
    failures: dict = field(default_factory=dict)  # failure_key -> report-schema failure dict
    notes: list = field(default_factory=list)

    def add_failure(self, f: dict) -> bool:
        """Record a failure; True when its key is new."""
        key = failure_key(self.name, f)
        self.verdict = FAIL
        if key in self.failures:
            self.failures[key]["occurrences"] = self.failures[key].get("occurrences", 1) + 1
            return False
        self.failures[key] = dict(f, occurrences=1)
        return True

    def to_json(self) -> dict:
        # A property that never judged anything (every run skipped itself) did not pass.
        ran_nothing = self.verdict == PASS and self.cases == 0 and not self.statistics
        return {
            "name": self.name,
            "layer": self.layer,
            "verdict": SKIPPED if ran_nothing else self.verdict,
            "cases": self.cases,
            "seconds": self.seconds,
            "ties": self.ties,
            "statistics": self.statistics,
            "failures": list(self.failures.values()),
            "note": "; ".join(dict.fromkeys(self.notes)),
        }


def finding_json(f: Finding) -> dict:
    return {
        "class": f.cls,
        "first_field": f.first_field,
        "message": f.message,
        "case": f.case,
        "evidence": f.evidence,
        "repro": f.repro,
    }


class _NewFailure(Exception):
    pass


@dataclass
class Campaign:
    kernel: object
    kernel_spec: str
    profile: object  # harness.profiles.Profile
    device: object  # torch.device
    seed: int
    shard: tuple[int, int]
    budget_s: float
    properties: dict  # name -> property object (claimed ones)
    corpus_dir: Path | None = None
    command: str = ""
    guide_margins: bool = True
    max_items: int | None = None  # stop after this many items (tests)
    acceptance_requests: int = 0  # > 0: measure accepted-length distributions on the toy example
    log: object = None  # callable(str); default: stderr
    progress_every_s: float = 10.0  # at most one progress line per this many seconds
    tallies: dict = field(default_factory=dict)
    coverage: dict = field(default_factory=dict)
    saved: list = field(default_factory=list)
    items_done: int = 0
    stop_on_failure: bool = False  # end the campaign at its first confirmed failure (mutation testing)
    _last_progress: float = -1e18
    _started: float = 0.0

    def _elapsed(self) -> float:
        """Seconds since the campaign started (``found_after_s`` of each new failure)."""
        return time.monotonic() - self._started

    def _say(self, text: str) -> None:
        (self.log or (lambda s: print(s, file=sys.stderr, flush=True)))(text)

    def _ctx(self, round_: int, name: str) -> RunContext:
        item_seed = RunContext(self.profile, self.device, self.seed).child_seed("fuzz", round_, name)
        return RunContext(self.profile, self.device, item_seed, kernel_spec=self.kernel_spec)

    def _tally(self, prop) -> PropertyTally:
        if prop.name not in self.tallies:
            self.tallies[prop.name] = PropertyTally(prop.name, prop.layer)
        return self.tallies[prop.name]

    def run(self) -> float:
        """Run items until the budget or ``max_items`` is spent; returns the seconds used."""
        from harness.properties.case_property import CaseProperty

        start = self._started = time.monotonic()
        deadline = start + self.budget_s
        last_seconds: dict[str, float] = {}
        for round_, name in work_items(list(self.properties), self.shard):
            now = time.monotonic()
            if now >= deadline or (self.max_items is not None and self.items_done >= self.max_items):
                break
            prop = self.properties[name]
            if not isinstance(prop, CaseProperty) and last_seconds.get(name, 0.0) > deadline - now:
                continue  # a whole statistical run would not finish in the time left
            t0 = time.monotonic()
            ctx = self._ctx(round_, name)
            if isinstance(prop, CaseProperty):
                self._search(prop, ctx, deadline)
            else:
                # A statistical item gets the campaign's deadline: not started when its projection
                # does not fit, stopped before its next assertion when it runs out ("skipped for budget").
                ctx.extra[DEADLINE_KEY] = time.perf_counter() + (deadline - time.monotonic())
                self._run_whole(prop, ctx)
            last_seconds[name] = time.monotonic() - t0
            if ctx.extra.get("device_fault"):
                # The CUDA context is gone: nothing more can run in this process
                # (harness/execution/kernel_calls.py).
                self._tally(prop).notes.append(
                    f"campaign stopped by a device fault: {ctx.extra['device_fault']}"
                )
                self._say(f"  DEVICE FAULT in {name}: campaign stopped; rerun to continue")
                break
            self.items_done += 1
            self._progress(round_, name, deadline)
            if self.stop_on_failure and any(t.failures for t in self.tallies.values()):
                break
            if (
                len(last_seconds) == len(self.properties)
                and all(not isinstance(p, CaseProperty) for p in self.properties.values())
                and all(t > deadline - time.monotonic() for t in last_seconds.values())
            ):
                break  # nothing left that fits in the remaining time
        self._progress(-1, "(done)", deadline, force=True)
        return time.monotonic() - start

    def _progress(self, round_: int, name: str, deadline: float, force: bool = False) -> None:
        if not force and time.monotonic() - self._last_progress < self.progress_every_s:
            return
        self._last_progress = time.monotonic()
        cases = sum(t.cases for t in self.tallies.values())
        distinct = sum(len(t.failures) for t in self.tallies.values())
        left = max(0.0, deadline - time.monotonic())
        self._say(
            f"[fuzz {self.shard[0]}/{self.shard[1]}] round {round_} {name:<28} "
            f"cases {cases:>6}  distinct failures {distinct:>3}  time left {left:7.0f} s"
        )

    def _record_cases(self, tally: PropertyTally, case, ties: int) -> None:
        from harness.generation.strategies import coverage_of

        tally.cases += 1
        tally.ties += ties
        for axis, values in coverage_of(case).items():
            self.coverage.setdefault(axis, []).extend(values)

    def _run_whole(self, prop, ctx: RunContext) -> None:
        tally = self._tally(prop)
        try:
            result: PropertyResult = prop.run(self.kernel, ctx)
        except KernelFault as exc:
            from harness.runner import fault_result

            result = fault_result(prop, exc, ctx)
        except Exception as exc:  # noqa: BLE001 -- a harness bug must not end the campaign
            tally.verdict = ERROR if tally.verdict != FAIL else FAIL
            tally.notes.append(f"harness error: {type(exc).__name__}: {exc}")
            return
        tally.cases += result.cases
        tally.seconds += result.seconds
        tally.ties += result.ties
        tally.statistics.extend(_stat_json(s, ctx.seed) for s in result.statistics)
        if result.note:
            tally.notes.append(result.note)
        if result.verdict == ERROR and tally.verdict != FAIL:
            tally.verdict = ERROR
        for axis, values in (ctx.extra.get("coverage") or {}).items():
            self.coverage.setdefault(axis, []).extend(values)
        for f in result.failures:
            fj = finding_json(f)
            if failure_key(prop.name, fj) not in tally.failures:
                fj["found_after_s"] = self._elapsed()
                self._save(prop.name, fj)
            tally.add_failure(fj)

    def _search(self, prop, ctx: RunContext, deadline: float) -> None:
        """One Hypothesis search of a CaseProperty, guided by ``target``; new failures shrunk and saved."""
        from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings, target
        from hypothesis.errors import Flaky

        tally = self._tally(prop)
        profile = self.profile
        state = {"key": None, "best": None, "t_fail": 0.0, "calls_after": 0}
        started = time.perf_counter()

        def shrink_spent() -> bool:
            return (
                state["calls_after"] >= profile.shrink_calls
                or time.perf_counter() - state["t_fail"] >= profile.shrink_seconds
            )

        def one_case(case) -> None:
            # Every raise goes through one line: Hypothesis tells bugs apart by the raising line, and
            # only shrinks toward candidates that fail "the same way".
            if failing(case):
                raise _NewFailure()

        def failing(case) -> bool:
            if state["key"] is not None:  # shrinking a new failure
                state["calls_after"] += 1
                if shrink_spent():
                    return case.to_dict() == state["best"][0].to_dict()
            elif time.monotonic() >= deadline:
                return False
            margins = oracle_margins if self.guide_margins else None
            try:
                scores = guidance_scores(case, margins)
            except Exception:  # noqa: BLE001 -- guidance must never hide the check itself
                scores = guidance_scores(case, None)
            for label, value in scores.items():
                target(value, label=label)
            outcome = prop.check_guarded(self.kernel, case, ctx)
            if outcome.skipped:
                return False
            if state["key"] is None:
                self._record_cases(tally, case, outcome.ties)
            for f in outcome.findings:
                key = failure_key(prop.name, finding_json(f))
                if state["key"] is None and key not in tally.failures:
                    state.update(key=key, best=(case, f), t_fail=time.perf_counter())
                    return True
                if key == state["key"]:
                    state["best"] = (case, f)
                    return True
                if state["key"] is None:
                    tally.add_failure(finding_json(f))  # a known failure seen again: count it
            return False

        runner = settings(
            max_examples=profile.max_examples,
            derandomize=False,
            database=None,
            deadline=None,
            phases=[Phase.generate, Phase.target, Phase.shrink],
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
            report_multiple_bugs=False,
            print_blob=False,
        )(
            # The seed CaseProperty.run uses: `check --seed <item seed> --only <property>` (same profile)
            # replays this item's generated examples.
            seed(ctx.child_seed("property", prop.name))(given(prop.strategy(self.kernel, ctx))(one_case))
        )
        try:
            runner()
        except (_NewFailure, Flaky):
            pass
        except Exception as exc:  # noqa: BLE001
            tally.notes.append(f"harness error: {type(exc).__name__}: {exc}")
            if tally.verdict != FAIL:
                tally.verdict = ERROR
        tally.seconds += time.perf_counter() - started
        if state["best"] is not None:
            self._confirm_and_record(prop, ctx, tally, *state["best"])

    def _confirm_and_record(self, prop, ctx, tally, case, finding) -> None:
        again = prop.check_guarded(self.kernel, case, ctx)
        keys = {failure_key(prop.name, finding_json(f)) for f in again.findings}
        fj = finding_json(finding)
        if failure_key(prop.name, fj) not in keys:
            fj["message"] += " [NOT reproduced when the minimal case was checked again: flaky kernel]"
            fj["class"] = fj["class"] + "_flaky"
        fj["evidence"] = dict(fj.get("evidence") or {}, fuzz_seed=self.seed, item_seed=ctx.seed)
        if failure_key(prop.name, fj) not in tally.failures:
            fj["found_after_s"] = self._elapsed()
            self._save(prop.name, fj)
            tally.add_failure(fj)
            self._say(
                f"  NEW FAILURE {prop.name}: {fj['class']} at {fj['first_field']}: {fj['message'][:160]}"
            )

    def _save(self, prop_name: str, fj: dict) -> None:
        if self.corpus_dir is None or not fj.get("case"):
            return
        from harness.campaigns.corpus import save_failure
        from harness.properties.case_property import FAULT_CLASSES

        path = save_failure(prop_name, fj, self.command, self.corpus_dir)
        fj["repro"] = f"python -m harness replay {path} --kernel {self.kernel_spec}"
        if fj["class"] in FAULT_CLASSES:  # in the foreground, for a debugger
            fj["repro"] += f" --profile {self.profile.name} --device {self.device.type} --in-process"
        self.saved.append(str(path))

    def acceptance(self) -> dict:
        if self.acceptance_requests <= 0:
            return {}
        try:
            return measure_acceptance(self.kernel, self.device, self.seed, self.acceptance_requests)
        except Exception as exc:  # noqa: BLE001 -- a plot must not cost the report
            self._say(f"acceptance measurement failed: {type(exc).__name__}: {exc}")
            return {}

    def report(self, started_iso: str, seconds: float, not_claimed: dict) -> dict:
        from harness.reporting.report import git_commit, versions

        props = [t.to_json() for _, t in sorted(self.tallies.items())]
        props += [
            {
                "name": n,
                "layer": layer,
                "verdict": NOT_CLAIMED,
                "cases": 0,
                "seconds": 0.0,
                "ties": 0,
                "statistics": [],
                "failures": [],
                "note": why,
            }
            for n, (layer, why) in sorted(not_claimed.items())
        ]
        total_cases = sum(p["cases"] for p in props)
        stats = [s for p in props for s in p["statistics"]]
        return {
            "schema": "specfuzz-report/1",
            "command": self.command,
            "kernel": self.kernel_spec,
            "profile": self.profile.name,
            "device": _device_name(self.device),
            "seed": self.seed,
            "shard": f"{self.shard[0]}/{self.shard[1]}",
            "started": started_iso,
            "duration_s": seconds,
            "versions": versions(),
            "commit": git_commit(),
            "family_wise_alpha": min(1.0, sum(float(s.get("alpha") or 0.0) for s in stats)),
            "budget_s": self.budget_s,
            "cases_per_hour": total_cases * 3600.0 / max(seconds, 1e-9),
            "items": self.items_done,
            "saved_to_corpus": self.saved,
            "properties": props,
            "coverage": self.coverage,
            **self.acceptance(),
        }


def _stat_json(s, item_seed: int) -> dict:
    from dataclasses import asdict

    d = asdict(s) if hasattr(s, "__dataclass_fields__") else dict(s)
    d["item_seed"] = item_seed
    return d


def _device_name(device) -> str:
    from harness.reporting.report import device_description

    return device_description(device)


# ----------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------
def select_properties(kernel, only: list[str]) -> tuple[dict, dict]:
    """``(claimed {name: prop}, not_claimed {name: (layer, reason)})`` from the registry."""
    from harness.runner import UnknownProperty
    from harness.runner import select_properties as registered

    try:
        props = registered(only or None)
    except UnknownProperty as exc:
        raise UsageError(str(exc)) from None
    claimed, not_claimed = {}, {}
    for prop in props:
        n = prop.name
        if prop.claimed(kernel):
            claimed[n] = prop
        else:
            why = getattr(prop, "not_claimed_reason", lambda k: "not claimed")(kernel) or "not claimed"
            not_claimed[n] = (prop.layer, why)
    return claimed, not_claimed


def run_local_shards(args, parallel: int, gpus: list[str], seed: int) -> int:
    """``--parallel N``: N shard processes of this campaign (pinned round-robin to ``gpus``), merged.

    Children write ``REPORT/shard-I/``; the merged report.json/html lands in ``REPORT``.
    """
    import subprocess

    from harness.campaigns.merge import load_reports, merge_reports, merged_exit_code
    from harness.reporting.report import json_safe
    from harness.reporting.report_html import write_html

    out = Path(args.report)
    children = []
    for i in range(parallel):
        cmd = [
            sys.executable,
            "-m",
            "harness",
            "fuzz",
            "--kernel",
            args.kernel,
            "--budget",
            args.budget,
            "--shard",
            f"{i}/{parallel}",
            "--seed",
            str(seed),
            "--profile",
            args.profile,
            "--report",
            str(out / f"shard-{i}"),
        ]
        cmd += ["--device", args.device] if args.device else []
        cmd += ["--no-save"] if args.no_save else (["--corpus", args.corpus] if args.corpus else [])
        cmd += [x for n in args.only for x in ("--only", n)]
        cmd += supervision_flags(args).split()
        if args.acceptance_requests is not None:
            cmd += ["--acceptance-requests", str(args.acceptance_requests)]
        env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} if gpus else {}))
        children.append(subprocess.Popen(cmd, env=env))
    codes = [c.wait() for c in children]
    reports = load_reports(
        [out / f"shard-{i}" for i in range(parallel) if (out / f"shard-{i}" / "report.json").exists()]
    )
    merged = merge_reports(reports, command=f"python -m harness fuzz --parallel {parallel} --seed {seed} ...")
    (out / "report.json").write_text(json.dumps(json_safe(merged), indent=1))
    write_html(merged, out / "report.html")
    print(
        f"fuzz: {parallel} shards exited {codes}; merged report -> {out / 'report.json'}, "
        f"{out / 'report.html'}",
        file=sys.stderr,
    )
    return 2 if any(c == 2 for c in codes) or len(reports) < parallel else merged_exit_code(merged)


def _cmd_fuzz(args) -> int:
    import datetime

    import torch

    from harness.execution.supervisor import close, profile_with_limits, supervise
    from harness.plugins import PluginError, load_kernel
    from harness.profiles import PROFILES
    from harness.reporting.report import json_safe
    from harness.reporting.report_html import write_html

    if args.profile is None:
        args.profile = "nightly" if torch.cuda.is_available() else "dev"
    try:
        budget = parse_duration(args.budget)
        shard = parse_shard(args.shard)
        if args.profile not in PROFILES:
            raise UsageError(f"unknown profile {args.profile!r}; known: {sorted(PROFILES)}")
        kernel = load_kernel(args.kernel)
        prepare_kernel(kernel)
        claimed, not_claimed = select_properties(kernel, args.only)
        profile = profile_with_limits(PROFILES[args.profile], args)
    except (UsageError, PluginError, ValueError, KernelNotReady) as exc:
        print(f"fuzz: {exc}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
    if args.parallel > 1:
        if shard != (0, 1):
            print("fuzz: --parallel and --shard cannot be combined", file=sys.stderr)
            return 2
        return run_local_shards(args, args.parallel, [g for g in args.gpus.split(",") if g], seed)
    device = (
        torch.device(args.device)
        if args.device
        else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    command = (
        f"python -m harness fuzz --kernel {args.kernel} --budget {args.budget} --shard {args.shard} "
        f"--seed {seed} --profile {args.profile}" + "".join(f" --only {n}" for n in args.only)
    ) + supervision_flags(args)
    if args.no_save:  # not into the repository's corpus; case files still back every repro command
        corpus = Path(args.report) / "cases"
    elif args.corpus:
        corpus = Path(args.corpus)
    else:
        from harness.campaigns.corpus import CORPUS_DIR

        corpus = CORPUS_DIR
    print(
        f"fuzz: seed {seed} (rerun with --seed {seed}), shard {shard[0]}/{shard[1]}, budget {budget:.0f} s, "
        f"profile {args.profile}, {len(claimed)} claimed properties, {len(not_claimed)} not claimed",
        file=sys.stderr,
    )
    kernel = supervise(kernel, args.kernel, profile, args.in_process)
    campaign = Campaign(
        kernel,
        args.kernel,
        profile,
        device,
        seed,
        shard,
        budget,
        claimed,
        corpus_dir=corpus,
        command=command,
        guide_margins=not args.no_margin_guidance,
        max_items=args.max_items,
        stop_on_failure=args.stop_on_failure,
        acceptance_requests=args.acceptance_requests
        if args.acceptance_requests is not None
        else (4096 if device.type == "cuda" else 128),
    )
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        seconds = campaign.run()
        report = campaign.report(started, seconds, not_claimed)
    finally:
        close(kernel)
    out = Path(args.report)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(json_safe(report), indent=1))
    write_html(report, out / "report.html")
    failed = [p for p in report["properties"] if p["verdict"] in (FAIL, ERROR)]
    n_fail = sum(len(p["failures"]) for p in report["properties"])
    print(
        f"fuzz: {campaign.items_done} items, {sum(p['cases'] for p in report['properties'])} cases in "
        f"{seconds:.0f} s ({report['cases_per_hour']:.0f} cases/hour), {n_fail} distinct failures in "
        f"{len(failed)} properties -> {out / 'report.json'}, {out / 'report.html'}",
        file=sys.stderr,
    )
    for p in failed:
        for f in p["failures"]:
            print(
                f"  {p['name']}: {f['class']} at {f['first_field']}\n    repro: {f['repro']}", file=sys.stderr
            )
    return 1 if failed else 0


def supervision_flags(args) -> str:
    """``--time-limit`` / ``--in-process`` as given, for commands that rerun this campaign."""
    flags = f" --time-limit {args.time_limit:g}" if args.time_limit is not None else ""
    return flags + (" --in-process" if args.in_process else "")


def add_cli(subparsers) -> None:
    from harness.execution.supervisor import add_supervision_args

    p = subparsers.add_parser("fuzz", help="time-budgeted, sharded fuzz campaign with JSON and HTML reports")
    p.add_argument("--kernel", default=DEFAULT_KERNEL, help="package.module:attr of the kernel under test")
    p.add_argument("--budget", required=True, help="time budget: 90s, 15m, 2h, 1h30m")
    p.add_argument("--shard", default="0/1", help="I/N: this process's deterministic share of the work")
    p.add_argument(
        "--seed", type=int, default=None, help="root seed (default: fresh, printed); same for all shards"
    )
    p.add_argument(
        "--profile",
        default=None,
        help="ci | dev | gpu | nightly (default: nightly with a GPU, dev on the CPU interpreter)",
    )
    p.add_argument("--device", default=None, help="cpu | cuda (default: cuda when present)")
    p.add_argument("--report", default="specfuzz-report", help="directory for report.json and report.html")
    p.add_argument("--corpus", default=None, help="where new failures are saved (default tests/regressions)")
    p.add_argument(
        "--no-save",
        action="store_true",
        help="do not add failures to the regression corpus (their case files go to REPORT/cases)",
    )
    p.add_argument("--only", action="append", default=[], metavar="PROPERTY", help="fuzz only this property")
    p.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="run N shards of this campaign as local processes and merge their reports",
    )
    p.add_argument(
        "--gpus", default="", help="with --parallel: CUDA device ids assigned round-robin, e.g. 0,1,2,3"
    )
    p.add_argument(
        "--stop-on-failure",
        action="store_true",
        help="end at the first confirmed failure (its found_after_s is the time to first failure)",
    )
    p.add_argument("--max-items", type=int, default=None, help="stop after this many work items")
    p.add_argument(
        "--acceptance-requests",
        type=int,
        default=None,
        help="replicas of the toy example for the accepted-length plot (0: none; default "
        "4096 on GPU, 128 on CPU)",
    )
    p.add_argument("--no-margin-guidance", action="store_true", help="do not steer toward oracle near-ties")
    add_supervision_args(p)
    p.set_defaults(func=_cmd_fuzz)
