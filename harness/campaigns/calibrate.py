"""False-alarm calibration: the statistical properties run on a CORRECT kernel with N independent seeds.

``python -m harness calibrate --kernel SPEC --runs N [--profile P] [--seed S] [--only NAME ...]
[--max-samples M] [--budget SECONDS] [--report DIR]``; ``python -m harness calibrate --merge DIR...
[--report DIR]`` pools shards (for example one per GPU, each with its own ``--seed``).

On a correct kernel every rejection is a false alarm, so this measures what the statistics promise:
- first-stage rejections: each assertion rejects with probability <= its stated ``alpha``, so over
  all assertions of all runs the count is (stochastically) at most Poisson(sum of alphas); the
  upper-tail probability of the observed count under that bound is reported;
- confirmed rejections (what a user would see as a failure) against the runs' family-wise bound;
- the p-value distribution, which a valid test keeps at or above uniform: the fractions of p-values
  below 0.001, 0.01, 0.1 and 0.5 with a one-sided binomial tail for an excess, and the
  Kolmogorov-Smirnov distance to U(0, 1) (discrete laws and pooling make p-values conservative, so a
  deficit of small p-values is expected, an excess is a calibration bug).
Verdict ``calibrated`` (exit 0) unless some tail probability falls below ``--tail-alpha`` (default
1e-3), then ``MISCALIBRATED`` (exit 1). ``--max-samples`` caps every assertion's sample size (for the
CPU); alphas are unchanged by it, only the power drops, so the calibration stays valid.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

P_THRESHOLDS = (0.001, 0.01, 0.1, 0.5)


@dataclass
class PropertyCalibration:
    """Every assertion one statistical property made over all calibration runs."""

    name: str
    runs: int = 0
    errors: int = 0
    p_values: list = field(default_factory=list)
    alphas: list = field(default_factory=list)
    first_stage_rejections: int = 0
    confirmed_rejections: int = 0
    failed_runs: int = 0
    seconds: float = 0.0

    def summary(self) -> dict:
        from scipy import stats as st

        n = len(self.p_values)
        budget = float(sum(self.alphas))
        out = {
            "property": self.name,
            "runs": self.runs,
            "errors": self.errors,
            "assertions": n,
            "first_stage_rejections": self.first_stage_rejections,
            "expected_at_most": budget,
            "rejection_tail_p": float(st.poisson.sf(self.first_stage_rejections - 1, budget))
            if self.first_stage_rejections
            else 1.0,
            "confirmed_rejections": self.confirmed_rejections,
            "failed_runs": self.failed_runs,
            "seconds": self.seconds,
            "p_below": {},
            "excess_tail_p": {},
        }
        ps = [min(max(float(p), 0.0), 1.0) for p in self.p_values if p == p]
        for t in P_THRESHOLDS:
            k = sum(p < t for p in ps)
            out["p_below"][str(t)] = k / len(ps) if ps else None
            out["excess_tail_p"][str(t)] = float(st.binom.sf(k - 1, len(ps), t)) if ps and k else 1.0
        if len(ps) >= 2:
            ks = st.kstest(ps, "uniform")
            out["ks_distance"], out["ks_p"] = float(ks.statistic), float(ks.pvalue)
        return out


def calibrate(
    kernel,
    kernel_spec: str,
    profile,
    device,
    root_seed: int,
    runs: int,
    properties: list,
    max_samples: int | None = None,
    budget_s: float | None = None,
    progress=print,
) -> dict[str, PropertyCalibration]:
    """Run each statistical property ``runs`` times with independent seeds; collect every assertion.

    With ``budget_s``, no new run starts after that many seconds (the summary says how many ran).
    """
    from harness.properties.base import ERROR, FAIL, RunContext

    tallies = {p.name: PropertyCalibration(p.name) for p in properties}
    root = RunContext(profile, device, root_seed)
    campaign_started = time.monotonic()
    for i in range(runs):
        if budget_s is not None and time.monotonic() - campaign_started > budget_s:
            progress(f"calibrate: time budget spent after {i} of {runs} runs")
            break
        for prop in properties:
            ctx = RunContext(profile, device, root.child_seed("calibrate", i), kernel_spec=kernel_spec)
            if max_samples:
                ctx.extra["stat_max_samples"] = int(max_samples)
            tally = tallies[prop.name]
            started = time.perf_counter()
            try:
                result = prop.run(kernel, ctx)
            except Exception as exc:  # noqa: BLE001 -- counted and shown, never fatal
                tally.errors += 1
                progress(f"  run {i} {prop.name}: harness error {type(exc).__name__}: {exc}")
                continue
            tally.seconds += time.perf_counter() - started
            tally.runs += 1
            tally.errors += result.verdict == ERROR
            tally.failed_runs += result.verdict == FAIL
            for s in result.statistics:
                tally.p_values.append(float(s.p_value))
                tally.alphas.append(float(s.alpha))
                tally.first_stage_rejections += bool(s.rejected)
                tally.confirmed_rejections += bool(s.rejected and s.confirmed is not False)
        progress(
            f"calibrate: run {i + 1}/{runs} done; rejections so far "
            f"{sum(t.first_stage_rejections for t in tallies.values())} first-stage, "
            f"{sum(t.failed_runs for t in tallies.values())} failed property runs"
        )
    return tallies


def merge_tallies(paths: list[str]) -> tuple[dict[str, PropertyCalibration], dict]:
    """Pool the raw tallies of several ``calibration.json`` files (shards run with distinct root
    seeds, e.g. one per GPU); returns the tallies and the shards' header fields."""
    tallies: dict[str, PropertyCalibration] = {}
    headers = {"kernel": set(), "profile": set(), "device": set(), "seed": [], "runs": 0}
    for path in paths:
        file = Path(path) / "calibration.json" if Path(path).is_dir() else Path(path)
        data = json.loads(file.read_text())
        for key in ("kernel", "profile", "device"):
            headers[key].add(data[key])
        headers["seed"].append(data["seed"])
        headers["runs"] += data["runs"]
        for name, raw in data["raw"].items():
            pooled = tallies.setdefault(name, PropertyCalibration(name))
            counters = ("runs", "errors", "first_stage_rejections", "confirmed_rejections", "failed_runs",
                        "seconds")
            for key in counters:
                setattr(pooled, key, getattr(pooled, key) + raw[key])
            pooled.p_values += raw["p_values"]
            pooled.alphas += raw["alphas"]
    if len(set(headers["seed"])) != len(headers["seed"]):
        raise ValueError("calibration shards share a root seed: their runs are not independent")
    return tallies, {k: (", ".join(sorted(v)) if isinstance(v, set) else v) for k, v in headers.items()}


def verdict(summaries: list[dict], tail_alpha: float) -> tuple[bool, list[str]]:
    """``(calibrated, reasons)``: miscalibrated when any tail probability is below ``tail_alpha``."""
    reasons = []
    for s in summaries:
        if s["rejection_tail_p"] < tail_alpha:
            reasons.append(
                f"{s['property']}: {s['first_stage_rejections']} rejections where at most "
                f"{s['expected_at_most']:.3g} are expected (tail p {s['rejection_tail_p']:.2g})"
            )
        for t, p in s["excess_tail_p"].items():
            if p < tail_alpha:
                reasons.append(
                    f"{s['property']}: too many p-values below {t} ({s['p_below'][t]:.4f}; tail p {p:.2g})"
                )
        if s["errors"]:
            reasons.append(f"{s['property']}: {s['errors']} runs ended in error")
    return not reasons, reasons


def format_table(summaries: list[dict]) -> str:
    head = (
        f"{'property':<24} {'runs':>5} {'asserts':>7} {'rej(1st)':>8} {'E<=':>9} {'confirmed':>9} "
        f"{'p<.01':>7} {'p<.1':>7} {'p<.5':>7} {'KS D':>6} {'secs':>7}"
    )
    lines = [head, "-" * len(head)]
    for s in summaries:
        pb = s["p_below"]
        f = lambda x: "-" if x is None else f"{x:.3f}"
        lines.append(
            f"{s['property']:<24} {s['runs']:>5} {s['assertions']:>7} {s['first_stage_rejections']:>8} "
            f"{s['expected_at_most']:>9.2g} {s['confirmed_rejections']:>9} {f(pb['0.01']):>7} "
            f"{f(pb['0.1']):>7} {f(pb['0.5']):>7} {s.get('ks_distance', float('nan')):>6.3f} "
            f"{s['seconds']:>7.0f}"
        )
    return "\n".join(lines)


def statistical_properties(only: list[str]) -> list:
    from harness.runner import select_properties

    props = [p for p in select_properties(only or None) if p.layer == 4]
    if not props:
        raise ValueError("no statistical (layer 4) properties selected")
    return props


def _cmd_calibrate(args) -> int:
    import torch

    from harness.contract import capabilities_of  # noqa: F401  (kernel protocol loaded with plugins)
    from harness.plugins import PluginError, load_kernel
    from harness.profiles import PROFILES, active_profile_name

    started = time.perf_counter()
    if args.merge:
        try:
            tallies, header = merge_tallies(args.merge)
        except (OSError, ValueError, KeyError) as exc:
            print(f"calibrate --merge: {exc}", file=sys.stderr)
            return 2
        fields = ("kernel", "profile", "device", "seed", "runs")
        kernel_spec, profile_name, device, seed, runs = (header[k] for k in fields)
        print(f"calibrate: merged {len(args.merge)} shards, {runs} runs, seeds {seed}")
    else:
        if args.runs is None:
            print("calibrate: --runs is required (or --merge DIR...)", file=sys.stderr)
            return 2
        try:
            kernel = load_kernel(args.kernel)
            props = [p for p in statistical_properties(args.only) if p.claimed(kernel)]
        except (PluginError, ValueError) as exc:
            print(f"calibrate: {exc}", file=sys.stderr)
            return 2
        profile = PROFILES[args.profile or active_profile_name()]
        device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
        kernel_spec, profile_name, runs = args.kernel, profile.name, args.runs
        print(
            f"calibrate: kernel {args.kernel}, {args.runs} runs x {len(props)} properties "
            f"({', '.join(p.name for p in props)}), profile {profile.name}, device {device}, seed {seed}"
            + (f", samples capped at {args.max_samples}" if args.max_samples else "")
        )
        tallies = calibrate(
            kernel, args.kernel, profile, device, seed, args.runs, props, args.max_samples, args.budget
        )
    summaries = [t.summary() for t in tallies.values()]
    ok, reasons = verdict(summaries, args.tail_alpha)
    print(format_table(summaries))
    total_alpha = sum(s["expected_at_most"] for s in summaries)
    total_rej = sum(s["first_stage_rejections"] for s in summaries)
    print(
        f"all assertions: {sum(s['assertions'] for s in summaries)}, first-stage rejections {total_rej} "
        f"(stated alpha budget: at most {total_alpha:.3g} expected), confirmed failures "
        f"{sum(s['failed_runs'] for s in summaries)}; {time.perf_counter() - started:.0f} s"
    )
    print("calibrated" if ok else "MISCALIBRATED:\n  " + "\n  ".join(reasons))
    if args.report:
        out = Path(args.report)
        out.mkdir(parents=True, exist_ok=True)
        (out / "calibration.json").write_text(
            json.dumps(
                {
                    "schema": "specfuzz-calibration/1",
                    "kernel": kernel_spec,
                    "profile": profile_name,
                    "device": str(device),
                    "seed": seed,
                    "runs": runs,
                    "max_samples": args.max_samples,
                    "calibrated": ok,
                    "reasons": reasons,
                    "properties": summaries,
                    "raw": {n: asdict(t) for n, t in tallies.items()},
                },
                indent=1,
            )
        )
        print(f"wrote {out / 'calibration.json'}")
    return 0 if ok else 1


def add_cli(subparsers) -> None:
    from harness.plugins import DEFAULT_KERNEL_SPEC

    p = subparsers.add_parser(
        "calibrate", help="false-alarm rate of the statistical properties on a correct kernel"
    )
    p.add_argument("--kernel", default=DEFAULT_KERNEL_SPEC)
    p.add_argument("--runs", type=int, default=None, help="independent seeds per property")
    p.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                   help="pool the calibration.json of shards run with distinct --seed (no new runs)")
    p.add_argument("--profile", default=None)
    p.add_argument("--device", choices=("cpu", "cuda"), default=None)
    p.add_argument("--seed", type=int, default=None, help="root seed (default: fresh, printed)")
    p.add_argument("--only", nargs="+", default=[], metavar="NAME", help="only these statistical properties")
    p.add_argument("--max-samples", type=int, default=None, help="cap on samples per assertion (CPU runs)")
    p.add_argument("--budget", type=float, default=None, help="seconds after which no new run starts")
    p.add_argument(
        "--tail-alpha", type=float, default=1e-3, help="tail probability that flags miscalibration"
    )
    p.add_argument("--report", default=None, help="directory for calibration.json")
    p.set_defaults(func=_cmd_calibrate)
