"""The ``specfuzz-report/1`` report (docs/interfaces.md section 5) and the console summary table.

``family_wise_alpha`` is the Holm bound of the run: Holm's step-down procedure at level
``sum(alpha_i)`` keeps the probability of ANY false alarm among all statistical assertions of the run
at or below that sum (the same bound as Bonferroni), whatever their dependence.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

from harness.properties.base import PropertyResult, RunContext
from harness.properties.statistical import TIME_SIZED

SCHEMA = "specfuzz-report/1"


def family_wise_alpha(results: list[PropertyResult]) -> float:
    """The run's family-wise false-alarm bound over every statistical assertion it made."""
    return min(1.0, sum(float(s.alpha) for r in results for s in r.statistics))


def statistical_reach(results: list[PropertyResult]) -> str:
    """What the run's statistical assertions could see: the range of their detectable total
    variation (power 0.999 at each one's alpha), and whether any property was time-sized to the
    kernel's speed (harness/properties/statistical.py); "" when none was made."""
    tvs = [s.detectable_tv for r in results for s in r.statistics]
    if not tvs:
        return ""
    sized = [r.name for r in results if r.note.startswith(TIME_SIZED)]
    how = f", {len(sized)} properties time-sized to the kernel's speed" if sized else ""
    return (f"{len(tvs)} statistical assertions detect TV >= {min(tvs):.2g} to {max(tvs):.2g} "
            f"(power 0.999){how}")


def versions() -> dict[str, str]:
    import hypothesis
    import numpy

    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "hypothesis": hypothesis.__version__,
    }
    try:
        import triton

        found["triton"] = triton.__version__
    except Exception:  # noqa: BLE001 -- triton is optional for third-party kernels
        found["triton"] = "absent"
    return found


def git_commit(root: Path | None = None) -> str:
    root = root or Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def device_description(device: torch.device) -> str:
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    return "cpu"


def build_report(
    results: list[PropertyResult],
    ctx: RunContext,
    command: str,
    started: _dt.datetime,
    duration_s: float,
    shard: str = "0/1",
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "command": command,
        "kernel": ctx.kernel_spec,
        "profile": ctx.profile.name,
        "device": device_description(ctx.device),
        "seed": ctx.seed,
        "shard": shard,
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(duration_s, 3),
        "versions": versions(),
        "commit": git_commit(),
        "family_wise_alpha": family_wise_alpha(results),
        "statistical_reach": statistical_reach(results),
        "properties": [r.to_json() for r in results],
        "coverage": ctx.extra.get("coverage", {}),
    }
    if ctx.extra.get("domain"):
        report["domain"] = ctx.extra["domain"]
    if ctx.extra.get("acceptance"):
        report["acceptance"] = ctx.extra["acceptance"]
    if ctx.extra.get("budget_s") is not None:  # check --budget (harness/timing/budget.py)
        from harness.timing.budget import SKIPPED_FOR_BUDGET

        report["budget_s"] = ctx.extra["budget_s"]
        report["skipped_for_budget"] = [r.name for r in results if r.note.startswith(SKIPPED_FOR_BUDGET)]
    return report


def json_safe(value: Any) -> Any:
    """Strict JSON: non-finite floats become the strings "NaN", "Infinity", "-Infinity"; numpy and
    torch values become Python numbers and lists; anything else unknown becomes its ``str``."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if callable(getattr(value, "tolist", None)):  # numpy arrays and scalars, torch tensors
        return json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def write_report(report: dict[str, Any], directory: str | Path) -> Path:
    """Write ``DIR/report.json`` (strict JSON, see ``json_safe``) and return its path."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    out = path / "report.json"
    out.write_text(json.dumps(json_safe(report), indent=1, allow_nan=False))
    return out


def summary_table(results: list[PropertyResult]) -> str:
    """A fixed-width table: property, layer, verdict, cases, ties, seconds, first failure."""
    head = (
        f"{'property':34s} {'layer':>5s} {'verdict':>11s} {'cases':>6s} {'ties':>5s} {'secs':>7s}"
        "  first failure"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        first = (
            f"{r.failures[0].cls} @ {r.failures[0].first_field}"
            if r.failures
            else (r.note if r.verdict != "pass" else "")
        )
        lines.append(
            f"{r.name:34s} {r.layer:5d} {r.verdict:>11s} {r.cases:6d} {r.ties:5d} {r.seconds:7.1f}"
            f"  {first[:70]}"
        )
    return "\n".join(lines)
