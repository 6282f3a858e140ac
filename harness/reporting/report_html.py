"""Readable HTML rendering of a ``specfuzz-report/1`` report (docs/interfaces.md section 5).

``render_html(report) -> str`` builds one self-contained page (no network, no external files): plots
are matplotlib PNGs embedded as base64 ``data:`` URIs. Sections carry stable ids so tests and people
can find them: ``run-header``, ``summary``, ``coverage``, ``acceptance``, ``statistics``,
``failures`` (one ``<section class="failure">`` per deduplicated failure). Every image has
``class="plot"`` and a ``data-plot`` name saying what it shows.

Evidence keys the page draws when present (all optional, see docs/interfaces.md section 6):
``observed``/``expected``/``labels`` (empirical vs exact law), ``margins`` with ``tie_margin`` and
``mismatch_index`` (decision margins of a coupled comparison), ``stderr_tail`` (a ``crash`` / ``hang``
finding's worker output, shown as written: its stack dump).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

VERDICT_COLOURS = {
    "pass": "#1a7f37",
    "fail": "#cf222e",
    "error": "#bc4c00",
    "skipped": "#9a6700",
    "not claimed": "#6e7781",
}
COVERAGE_AXES = ("vocab_size", "draft_len", "temperature_band", "family", "chunk_budget", "dtype", "method")
LOG2_BINNED_AXES = ("vocab_size", "chunk_budget")
MAX_CASE_CHARS = 20_000  # a minimal case is printed in full unless it is huge (then truncated, marked)


# ----------------------------------------------------------------------------------------------------
# Plot helpers: each returns an <img> tag, or "" when there is nothing to draw.
# ----------------------------------------------------------------------------------------------------
def _figure(width: float = 6.0, height: float = 2.8):
    from matplotlib.figure import Figure  # object API only: no pyplot global state

    fig = Figure(figsize=(width, height), dpi=90)
    return fig, fig.add_subplot(1, 1, 1)


def _img(fig, name: str, alt: str) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f'<img class="plot" data-plot="{html.escape(name)}" alt="{html.escape(alt)}" '
        f'src="data:image/png;base64,{data}">'
    )


def coverage_counts(values: Any, axis: str) -> Counter:
    """Counts per bin for one coverage axis.

    ``values`` is either a list of observed values (one per case) or a ``{label: count}`` mapping
    (what ``merge`` may produce). Vocabulary sizes and chunk budgets are binned by powers of two.
    """
    if isinstance(values, dict):
        raw = Counter({k: int(v) for k, v in values.items()})
    else:
        raw = Counter(values or [])
    if axis not in LOG2_BINNED_AXES:
        return Counter({str(k): c for k, c in raw.items()})
    binned: Counter = Counter()
    for k, c in raw.items():
        binned[_log2_bin(k)] += c
    return binned


def _log2_bin(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)  # e.g. "unbounded", None
    if not math.isfinite(v) or v <= 0:
        return str(value)
    e = int(math.floor(math.log2(v)))
    return f"2^{e}..2^{e + 1}"


def _sort_key(label: str):
    head = label.split("..")[0]
    try:
        return (0, float(head[2:]) if head.startswith("2^") else float(head), label)
    except ValueError:
        return (1, 0.0, label)


def plot_coverage(axis: str, counts: Counter) -> str:
    if not counts:
        return ""
    labels = sorted(counts, key=_sort_key)
    fig, ax = _figure(5.0, 2.4)
    ax.bar(range(len(labels)), [counts[lab] for lab in labels], color="#0969da")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(
        labels, rotation=45 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center", fontsize=7
    )
    ax.set_ylabel("cases")
    ax.set_title(axis)
    return _img(fig, f"coverage-{axis}", f"histogram of {axis} over the cases run")


def plot_acceptance(acceptance: dict, exact: dict | None = None, n: int | None = None) -> str:
    """Grouped bars of empirical ``P(tau)`` per method; exact values (when given) as black ticks."""
    series = {m: list(v) for m, v in (acceptance or {}).items() if v}
    if not series:
        return ""
    g = max(len(v) for v in series.values())
    width = 0.8 / len(series)
    fig, ax = _figure()
    for i, (method, probs) in enumerate(sorted(series.items())):
        xs = [t + (i - (len(series) - 1) / 2) * width for t in range(len(probs))]
        ax.bar(
            xs, probs, width=width, label=f"{method} (E[tau]={sum(t * p for t, p in enumerate(probs)):.3f})"
        )
        ex = (exact or {}).get(method)
        if ex and len(ex) == len(probs):
            ax.scatter(
                xs,
                ex,
                marker="_",
                s=300,
                color="black",
                zorder=3,
                label=f"{method} exact" if i == 0 else None,
            )
    ax.set_xticks(range(g))
    ax.set_xlabel("tau (accepted draft tokens)")
    ax.set_ylabel("P(tau)")
    ax.legend(fontsize=8)
    ax.set_title("accepted-length distribution" + (f" ({n} requests per method)" if n else ""))
    return _img(fig, "acceptance", "accepted-length distributions of token and block verification")


def plot_law(name: str, observed: list, expected: list, labels: list | None) -> str:
    """Empirical vs exact law. ``observed`` are counts (or frequencies), ``expected`` counts or probs."""
    if not observed or not expected or len(observed) != len(expected):
        return ""
    obs_total, exp_total = float(sum(observed)), float(sum(expected))
    if obs_total <= 0 or exp_total <= 0:
        return ""
    obs = [o / obs_total for o in observed]
    exp = [e / exp_total for e in expected]
    n = len(obs)
    fig, ax = _figure(max(6.5, min(12.0, 0.25 * n)), 2.8)
    xs = list(range(n))
    ax.bar([x - 0.2 for x in xs], exp, width=0.4, label="exact", color="#8c959f")
    ax.bar([x + 0.2 for x in xs], obs, width=0.4, label="empirical", color="#cf222e")
    if labels and len(labels) == n and n <= 40:
        ax.set_xticks(xs)
        ax.set_xticklabels([str(lab) for lab in labels], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("probability")
    tv = 0.5 * sum(abs(o - e) for o, e in zip(obs, exp, strict=True))
    ax.set_title(f"{name}: empirical vs exact (TV {tv:.4f})", fontsize=9)
    ax.legend(fontsize=8)
    return _img(fig, f"law-{name}", f"empirical against exact law for {name}")


def plot_margins(
    name: str, margins: list, tie_margin: float | None, mismatch_index: Iterable[int] = ()
) -> str:
    """Signed decision margins of a coupled comparison, mismatched decisions highlighted."""
    pts = [(i, float(m)) for i, m in enumerate(margins or []) if m is not None and math.isfinite(float(m))]
    if not pts:
        return ""
    bad = set(int(i) for i in (mismatch_index or []))
    fig, ax = _figure()
    ok = [(i, m) for i, m in pts if i not in bad]
    wrong = [(i, m) for i, m in pts if i in bad]
    if ok:
        ax.scatter([i for i, _ in ok], [m for _, m in ok], s=10, color="#0969da", label="agree")
    if wrong:
        ax.scatter(
            [i for i, _ in wrong], [m for _, m in wrong], s=30, color="#cf222e", marker="x", label="mismatch"
        )
    if tie_margin:
        ax.axhspan(-tie_margin, tie_margin, color="#fff8c5", label=f"tie band +-{tie_margin:g}")
    ax.axhline(0.0, color="black", linewidth=0.5)
    ax.set_yscale("symlog", linthresh=max(1e-9, float(tie_margin or 1e-7)))
    ax.set_xlabel("decision")
    ax.set_ylabel("margin (oracle)")
    ax.legend(fontsize=8)
    ax.set_title(f"{name}: decision margins", fontsize=9)
    return _img(fig, f"margins-{name}", f"decision margins for {name}")


# ----------------------------------------------------------------------------------------------------
# Sections
# ----------------------------------------------------------------------------------------------------
def _e(x: Any) -> str:
    return html.escape(str(x))


def _verdict_badge(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict, "#6e7781")
    return f'<span class="verdict" style="background:{colour}">{_e(verdict)}</span>'


def overall_verdict(report: dict) -> str:
    """``fail`` if any property failed, else ``error`` if any errored, else ``pass`` if any passed."""
    verdicts = {p.get("verdict") for p in report.get("properties", [])}
    for v in ("fail", "error", "pass"):
        if v in verdicts:
            return v
    return "not claimed"


def _header(report: dict) -> str:
    versions = report.get("versions") or {}
    rows = [
        ("verdict", _verdict_badge(overall_verdict(report))),
        ("command", f"<code>{_e(report.get('command', ''))}</code>"),
        ("kernel", _e(report.get("kernel", ""))),
        ("commit", _e(report.get("commit", "unknown"))),
        ("device / GPU", _e(report.get("device", ""))),
        ("profile", _e(report.get("profile", ""))),
        ("seed(s)", _e(report.get("seeds", report.get("seed", "")))),
        ("shard", _e(report.get("shard", ""))),
        (
            "budget",
            _e(f"{report['budget_s']:.0f} s" if report.get("budget_s") is not None else "none (check)"),
        ),
        ("started", _e(report.get("started", ""))),
        ("duration", _e(f"{float(report.get('duration_s', 0.0)):.1f} s")),
        ("cases run", _e(sum(int(p.get("cases", 0)) for p in report.get("properties", [])))),
        ("family-wise alpha", _num(report.get("family_wise_alpha", ""))),
        ("versions", _e(", ".join(f"{k} {v}" for k, v in versions.items()))),
    ]
    if report.get("skipped_for_budget"):
        rows.append(("skipped for budget", _e(", ".join(report["skipped_for_budget"]))))
    if report.get("cases_per_hour") is not None:
        rows.append(("cases per hour", _e(f"{float(report['cases_per_hour']):.0f}")))
    if report.get("shards_missing"):
        rows.append(("shards missing", _e(report["shards_missing"])))
    for warning in report.get("merge_warnings") or []:
        rows.append(("merge warning", _e(warning)))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<section id="run-header"><h1>specfuzz report</h1><table class="kv">{body}</table></section>'


def shown_verdict(prop: dict) -> str:
    """The verdict to display: a "pass" that ran no case and made no assertion is shown as "nothing run"
    (e.g. a statistical property that skipped itself as too slow), never as a green pass."""
    verdict = prop.get("verdict", "")
    if verdict == "pass" and not prop.get("cases") and not prop.get("statistics"):
        return "nothing run"
    return verdict


def _summary(report: dict) -> str:
    rows = []
    for p in report.get("properties", []):
        rows.append(
            "<tr>"
            f"<td>{_e(p.get('name'))}</td><td>{_e(p.get('layer'))}</td><td>{_verdict_badge(shown_verdict(p))}</td>"
            f"<td>{_e(p.get('cases', 0))}</td><td>{float(p.get('seconds', 0.0)):.1f}</td>"
            f"<td>{_e(p.get('ties', 0))}</td>"
            f"<td>{len(p.get('statistics') or [])}</td><td>{len(p.get('failures') or [])}</td>"
            f"<td>{_e(p.get('note', ''))}</td></tr>"
        )
    head = (
        "<tr><th>property</th><th>layer</th><th>verdict</th><th>cases</th><th>seconds</th><th>ties</th>"
        "<th>stat. assertions</th><th>failures</th><th>note</th></tr>"
    )
    return f'<section id="summary"><h2>Properties</h2><table>{head}{"".join(rows)}</table></section>'


def _coverage(report: dict) -> str:
    coverage = report.get("coverage") or {}
    axes = [a for a in COVERAGE_AXES if a in coverage] + sorted(a for a in coverage if a not in COVERAGE_AXES)
    plots = [plot_coverage(a, coverage_counts(coverage[a], a)) for a in axes]
    plots = [p for p in plots if p]
    body = "".join(f'<div class="cell">{p}</div>' for p in plots) or "<p>No coverage recorded.</p>"
    return (
        f'<section id="coverage"><h2>Coverage of the fuzz space</h2><div class="grid">{body}</div></section>'
    )


def _acceptance(report: dict) -> str:
    plot = plot_acceptance(
        report.get("acceptance") or {}, report.get("acceptance_exact"), report.get("acceptance_n")
    )
    body = plot or "<p>No accepted-length distributions recorded.</p>"
    return f'<section id="acceptance"><h2>Accepted lengths: token vs block</h2>{body}</section>'


MAX_STAT_ROWS = 2000


def _statistics(report: dict) -> str:
    """Per-property summary (assertions, rejections, smallest p), then every assertion (collapsed)."""
    summary, rows = [], []
    for p in report.get("properties", []):
        stats = p.get("statistics") or []
        if not stats:
            continue
        p_values = [s.get("p_value") for s in stats if isinstance(s.get("p_value"), (int, float))]
        tvs = [s.get("detectable_tv") for s in stats if isinstance(s.get("detectable_tv"), (int, float))]
        n_rej = sum(bool(s.get("rejected")) for s in stats)
        row_cls = ' class="rejected"' if n_rej else ""
        summary.append(
            f"<tr{row_cls}><td>{_e(p.get('name'))}</td><td>{len(stats)}</td>"
            f"<td>{n_rej}</td><td>{_num(min(p_values) if p_values else None)}</td>"
            f"<td>{_num(max(tvs) if tvs else None)}</td></tr>"
        )
        for s in stats:
            rejected = s.get("rejected", False)
            if len(rows) >= MAX_STAT_ROWS and not rejected:
                continue
            cls = ' class="rejected"' if rejected else ""
            rows.append(
                f"<tr{cls}><td>{_e(p.get('name'))}</td><td>{_e(s.get('name'))}</td><td>{_e(s.get('n'))}</td>"
                f"<td>{_e(s.get('cells'))}</td><td>{_num(s.get('statistic'))}</td><td>{_num(s.get('p_value'))}</td>"
                f"<td>{_num(s.get('alpha'))}</td><td>{_num(s.get('power'))}</td><td>{_num(s.get('detectable_tv'))}</td>"
                f"<td>{'yes' if rejected else 'no'}</td><td>{_e(s.get('confirmed', ''))}</td></tr>"
            )
    if not rows:
        return '<section id="statistics"><h2>Statistical assertions</h2><p>None in this run.</p></section>'
    head_sum = (
        "<tr><th>property</th><th>assertions</th><th>rejected</th><th>smallest p-value</th>"
        "<th>largest detectable TV</th></tr>"
    )
    head = (
        "<tr><th>property</th><th>assertion</th><th>n</th><th>cells</th><th>statistic</th><th>p-value</th>"
        "<th>alpha</th><th>power</th><th>detectable TV</th><th>rejected</th><th>confirmed</th></tr>"
    )
    return (
        f'<section id="statistics"><h2>Statistical assertions</h2><p>Family-wise false-alarm bound: '
        f"{_num(report.get('family_wise_alpha', '?'))}</p><table>{head_sum}{''.join(summary)}</table>"
        f"<details><summary>every assertion ({len(rows)} shown)</summary><table>{head}{''.join(rows)}"
        f"</table></details></section>"
    )


def _num(x: Any) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:.4g}"
    return _e(x if x is not None else "")


def mismatch_index(evidence: dict) -> list[int]:
    """Decisions to highlight: ``mismatch_index`` when given, else the first position where the
    kernel's and the oracle's emitted tokens differ (that draft slot's decision went the other way)."""
    if evidence.get("mismatch_index") is not None:
        return [int(i) for i in evidence["mismatch_index"]]
    kern, ref = evidence.get("kernel_tokens"), evidence.get("reference_tokens")
    if not isinstance(kern, list) or not isinstance(ref, list):
        return []
    pairs = enumerate(zip(kern, ref, strict=False))
    first = next((i for i, (a, b) in pairs if a != b), min(len(kern), len(ref)))
    return [first]


def _failure_plots(prop: dict, failure: dict) -> list[str]:
    ev = failure.get("evidence") or {}
    name = f"{prop.get('name')}-{failure.get('class')}"
    plots = [plot_law(name, ev.get("observed"), ev.get("expected"), ev.get("labels"))]
    if not plots[0]:
        # A statistical failure may carry its law in the property's rejected statistics instead.
        for s in prop.get("statistics") or []:
            if s.get("rejected") and s.get("observed"):
                plots.append(
                    plot_law(
                        f"{prop.get('name')}-{s.get('name')}",
                        s.get("observed"),
                        s.get("expected"),
                        s.get("labels"),
                    )
                )
    if ev.get("margins"):
        plots.append(plot_margins(name, ev.get("margins"), ev.get("tie_margin"), mismatch_index(ev)))
    return [p for p in plots if p]


def compact_json(obj: dict) -> str:
    """One top-level key per line, each value on one line: long logit arrays stay readable."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v, default=str)}" for k, v in sorted(obj.items())]
    return "{\n" + ",\n".join(lines) + "\n}"


def _failures(report: dict) -> str:
    parts = []
    n = 0
    for p in report.get("properties", []):
        for f in p.get("failures") or []:
            n += 1
            case_text = compact_json(f.get("case") or {})
            if len(case_text) > MAX_CASE_CHARS:
                case_text = (
                    case_text[:MAX_CASE_CHARS]
                    + f"\n... truncated ({len(case_text)} characters in report.json)"
                )
            evidence = {
                k: v for k, v in (f.get("evidence") or {}).items() if k not in ("margins", "stderr_tail")
            }
            ev_text = compact_json(evidence)
            if len(ev_text) > MAX_CASE_CHARS:
                ev_text = ev_text[:MAX_CASE_CHARS] + "\n... truncated"
            plots = "".join(f'<div class="cell">{img}</div>' for img in _failure_plots(p, f))
            parts.append(
                f'<section class="failure" id="failure-{n}">'
                f"<h3>{n}. {_e(p.get('name'))} &mdash; {_e(f.get('class'))} at "
                f"<code>{_e(f.get('first_field'))}</code></h3>"
                f'<p class="message">{_e(f.get("message", ""))}</p>'
                f'<p>Reproduce: <code class="repro">{_e(f.get("repro", ""))}</code></p>'
                f'<div class="grid">{plots}</div>'
                f'<details open><summary>minimal case</summary><pre class="case">{_e(case_text)}</pre>'
                "</details>"
                f'<details><summary>evidence</summary><pre class="evidence">{_e(ev_text)}</pre></details>'
                f"{_stderr_tail(f)}</section>"
            )
    body = "".join(parts) or "<p>No failures.</p>"
    return f'<section id="failures"><h2>Failures ({n})</h2>{body}</section>'


def _stderr_tail(failure: dict) -> str:
    """The worker's last words for a ``crash`` / ``hang`` finding (its stack dump), as written."""
    tail = (failure.get("evidence") or {}).get("stderr_tail")
    if not tail:
        return ""
    summary = "<summary>worker stderr (tail)</summary>"
    return f'<details open>{summary}<pre class="stderr">{_e(tail)}</pre></details>'


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#1f2328}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #d0d7de;padding:2px 8px;font-size:13px;text-align:left}
.kv th{background:#f6f8fa}.verdict{color:#fff;padding:1px 8px;border-radius:8px}
.grid{display:flex;flex-wrap:wrap;gap:8px}.cell{border:1px solid #d0d7de}
tr.rejected{background:#ffebe9}.failure{border-left:4px solid #cf222e;padding-left:1em;margin:1em 0}
pre{background:#f6f8fa;padding:.5em;max-height:30em;overflow:auto;font-size:12px}code{font-size:12px}
"""


def render_html(report: dict) -> str:
    """The whole report as one self-contained HTML page."""
    title = f"specfuzz {overall_verdict(report)}: {report.get('kernel', '')} ({report.get('profile', '')})"
    body = "".join(
        [
            _header(report),
            _summary(report),
            _failures(report),
            _acceptance(report),
            _coverage(report),
            _statistics(report),
        ]
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{STYLE}</style></head><body>{body}</body></html>"
    )


def write_html(report: dict, path: str | Path) -> Path:
    """Render ``report`` to ``path`` (a file, or a directory that receives ``report.html``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.html"
    path.write_text(render_html(report), encoding="utf-8")
    return path


def _cmd_html(args) -> int:
    src = Path(args.report)
    report_json = src / "report.json" if src.is_dir() else src
    report = json.loads(report_json.read_text())
    out = write_html(report, args.output or report_json.with_suffix(".html"))
    print(f"wrote {out}")
    return 0


def add_cli(subparsers) -> None:
    """``python -m harness html REPORT [-o OUT]``: render an existing report.json to HTML."""
    p = subparsers.add_parser("html", help="render a report.json as a readable HTML page with plots")
    p.add_argument("report", help="report.json, or a directory holding one")
    p.add_argument("-o", "--output", default=None, help="output file (default: beside the JSON)")
    p.set_defaults(func=_cmd_html)
