"""Merge the ``specfuzz-report/1`` reports of many shards or runs into one report.

``python -m harness merge DIR_OR_FILE... [--out DIR]`` finds every ``report.json`` under the paths
given, merges them and writes ``report.json`` and ``report.html`` to ``--out``. Exit code: 0 when the
merged verdict is pass, 1 when any property failed or errored, 2 on unusable input.

Merge rules (each chosen so that the merged report claims no more than its parts prove):
- all reports must share the schema and the kernel; differing commits, profiles or versions are kept
  but listed under ``merge_warnings``;
- per property: verdict is the worst (fail > error > pass > skipped > not claimed), cases/seconds/ties add up,
  statistics concatenate (each tagged with its shard), failures are deduplicated by
  ``failure_key`` = (property, class, first differing field), keeping the smallest case and counting
  ``occurrences``;
- ``family_wise_alpha`` is the SUM of the parts' bounds (a union bound: any shard's false alarm is a
  false alarm of the whole), capped at 1;
- ``duration_s`` is the longest part (shards run side by side), ``seeds`` lists every part's seed,
  ``shards_missing`` names shard indices of ``I/N`` never seen;
- coverage lists concatenate (mappings of counts add up); accepted-length distributions average.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

SCHEMA = "specfuzz-report/1"
VERDICT_RANK = {"fail": 4, "error": 3, "pass": 2, "skipped": 1, "not claimed": 0}


class MergeError(Exception):
    """Reports that cannot be merged (wrong schema, different kernels, nothing found)."""


def failure_key(property_name: str, failure: dict) -> tuple[str, str, str]:
    """The identity of a failure for deduplication: (property, class, first differing field).

    Indices inside the first field are dropped (``output_token_ids[3,1]`` -> ``output_token_ids``):
    the same bug seen at another request or position is the same failure.
    """
    first = str(failure.get("first_field", ""))
    return property_name, str(failure.get("class", "")), first.split("[", 1)[0]


def case_size(failure: dict) -> int:
    """How big a failure's case is (smaller is a better representative)."""
    return len(json.dumps(failure.get("case") or {}, sort_keys=True, default=str))


def find_reports(paths: Iterable[str | Path]) -> list[Path]:
    """Every report.json named directly or found (recursively) under a directory, sorted, unique."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            found.extend(sorted(p.rglob("report.json")))
        else:
            raise MergeError(f"{p} does not exist")
    unique = sorted(set(q.resolve() for q in found))
    if not unique:
        raise MergeError("no report.json found under " + ", ".join(map(str, paths)))
    return unique


def load_reports(paths: Iterable[str | Path]) -> list[dict]:
    reports = []
    for path in find_reports(paths):
        try:
            report = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise MergeError(f"{path} is not valid JSON: {exc}") from exc
        report.setdefault("_source", str(path))
        reports.append(report)
    return reports


def _merge_failures(prop_name: str, parts: list[tuple[str, dict]]) -> list[dict]:
    by_key: dict[tuple, dict] = {}
    for shard, f in parts:
        key = failure_key(prop_name, f)
        occurrences = int(f.get("occurrences", 1))
        kept = by_key.get(key)
        if kept is None:
            by_key[key] = dict(f, occurrences=occurrences, shards=[shard])
            continue
        total = kept["occurrences"] + occurrences
        shards = kept["shards"] + [shard]
        if case_size(f) < case_size(kept):
            kept = dict(f)
        by_key[key] = dict(kept, occurrences=total, shards=shards)
    return list(by_key.values())


def _merge_property(name: str, parts: list[tuple[str, dict]]) -> dict:
    verdict = max((p.get("verdict", "not claimed") for _, p in parts), key=lambda v: VERDICT_RANK.get(v, 3))
    notes = []
    for _, p in parts:
        if p.get("note") and p["note"] not in notes:
            notes.append(p["note"])
    return {
        "name": name,
        "layer": parts[0][1].get("layer"),
        "verdict": verdict,
        "cases": sum(int(p.get("cases", 0)) for _, p in parts),
        "seconds": sum(float(p.get("seconds", 0.0)) for _, p in parts),
        "ties": sum(int(p.get("ties", 0)) for _, p in parts),
        "statistics": [dict(s, shard=shard) for shard, p in parts for s in p.get("statistics") or []],
        "failures": _merge_failures(
            name, [(shard, f) for shard, p in parts for f in p.get("failures") or []]
        ),
        "note": "; ".join(notes),
    }


def _merge_coverage(coverages: list[dict]) -> dict:
    merged: dict = {}
    for cov in coverages:
        for axis, values in (cov or {}).items():
            have = merged.get(axis)
            if have is None:
                merged[axis] = dict(values) if isinstance(values, dict) else list(values)
            elif isinstance(have, list) and isinstance(values, list):
                have.extend(values)
            else:
                counts = Counter(have if isinstance(have, dict) else Counter(map(str, have)))
                counts.update(values if isinstance(values, dict) else Counter(map(str, values)))
                merged[axis] = dict(counts)
    return merged


def _merge_acceptance(parts: list[dict]) -> dict:
    sums: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for acc in parts:
        for method, probs in (acc or {}).items():
            if not probs:
                continue
            cur = sums.setdefault(method, [])
            cur.extend([0.0] * (len(probs) - len(cur)))
            for i, p in enumerate(probs):
                cur[i] += float(p)
            counts[method] = counts.get(method, 0) + 1
    return {m: [x / counts[m] for x in v] for m, v in sums.items()}


def _shards_missing(shards: list[str]) -> list[int] | None:
    totals, seen = set(), set()
    for s in shards:
        try:
            i, n = (int(x) for x in str(s).split("/"))
        except ValueError:
            return None
        totals.add(n)
        seen.add(i)
    if len(totals) != 1:
        return None
    (n,) = totals
    return sorted(set(range(n)) - seen)


def merge_reports(reports: list[dict], command: str = "python -m harness merge") -> dict:
    """One report from many (rules in the module docstring). Raises ``MergeError``."""
    if not reports:
        raise MergeError("nothing to merge")
    for r in reports:
        if r.get("schema") != SCHEMA:
            raise MergeError(
                f"{r.get('_source', 'a report')} has schema {r.get('schema')!r}, expected {SCHEMA!r}"
            )
    kernels = {r.get("kernel") for r in reports}
    if len(kernels) != 1:
        raise MergeError(f"reports are for different kernels: {sorted(map(str, kernels))}")
    warnings = []
    for key in ("commit", "profile", "versions", "device"):
        values = {json.dumps(r.get(key), sort_keys=True) for r in reports}
        if len(values) > 1:
            warnings.append(f"{key} differs between parts: {sorted(values)}")
    shard_seed = Counter((str(r.get("shard")), str(r.get("seed"))) for r in reports)
    for (shard, seed), n in shard_seed.items():
        if n > 1:
            warnings.append(f"shard {shard} with seed {seed} appears {n} times (same work merged twice)")

    order: list[str] = []
    parts: dict[str, list[tuple[str, dict]]] = {}
    for r in reports:
        for p in r.get("properties", []):
            if p["name"] not in parts:
                order.append(p["name"])
                parts[p["name"]] = []
            parts[p["name"]].append((str(r.get("shard", "?")), p))

    first = reports[0]
    shards = [str(r.get("shard", "?")) for r in reports]
    merged = {
        "schema": SCHEMA,
        "command": command,
        "kernel": first.get("kernel"),
        "profile": first.get("profile"),
        "device": first.get("device"),
        "seed": first.get("seed"),
        "seeds": [r.get("seed") for r in reports],
        "shard": "merged " + ",".join(shards),
        "shards_missing": _shards_missing(shards),
        "started": min((r.get("started") or "" for r in reports), default=""),
        "duration_s": max(float(r.get("duration_s", 0.0)) for r in reports),
        "versions": first.get("versions", {}),
        "commit": first.get("commit"),
        "family_wise_alpha": min(1.0, sum(float(r.get("family_wise_alpha") or 0.0) for r in reports)),
        "properties": [_merge_property(name, parts[name]) for name in order],
        "coverage": _merge_coverage([r.get("coverage") for r in reports]),
        "acceptance": _merge_acceptance([r.get("acceptance") for r in reports]),
        "merged_from": [r.get("_source", "") for r in reports],
        "merge_warnings": warnings,
    }
    budgets = [r.get("budget_s") for r in reports if r.get("budget_s") is not None]
    if budgets:
        merged["budget_s"] = max(budgets)
    return merged


def merged_exit_code(report: dict) -> int:
    verdicts = {p.get("verdict") for p in report.get("properties", [])}
    return 1 if verdicts & {"fail", "error"} else 0


def _cmd_merge(args) -> int:
    from harness.reporting.report import json_safe
    from harness.reporting.report_html import write_html

    try:
        reports = load_reports(args.paths)
        command = "python -m harness merge " + " ".join(args.paths)
        merged = merge_reports(reports, command=command)
    except MergeError as exc:
        print(f"merge: {exc}")
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(json_safe(merged), indent=1))
    write_html(merged, out / "report.html")
    for w in merged["merge_warnings"]:
        print(f"warning: {w}")
    if merged["shards_missing"]:
        print(f"warning: shards never seen: {merged['shards_missing']}")
    n_fail = sum(len(p["failures"]) for p in merged["properties"])
    print(
        f"merged {len(reports)} reports: {len(merged['properties'])} properties, {n_fail} distinct failures "
        f"-> {out / 'report.json'}, {out / 'report.html'}"
    )
    return merged_exit_code(merged)


def add_cli(subparsers) -> None:
    """``merge`` (and ``html``, which renders any report.json) subcommands."""
    from harness.reporting import report_html

    p = subparsers.add_parser("merge", help="merge shard reports (report.json) into one report")
    p.add_argument("paths", nargs="+", help="report.json files or directories searched for them")
    p.add_argument("--out", default="specfuzz-merged", help="directory for the merged report.json/html")
    p.set_defaults(func=_cmd_merge)
    report_html.add_cli(subparsers)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m harness.campaigns.merge PATHS... --out DIR``), as ``harness merge``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.campaigns.merge")
    sub = parser.add_subparsers(dest="command", required=True)
    add_cli(sub)
    args = parser.parse_args(["merge", *(argv if argv is not None else __import__("sys").argv[1:])])
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
