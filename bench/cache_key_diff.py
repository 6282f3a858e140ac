"""Why a launch compiled although the prewarm ran: compare Triton cache entries made after a mark
file with the entries of the same kernel made before it (issue 42, prewarm key mismatch).

  python bench/cache_key_diff.py TRITON_CACHE_DIR MARK_FILE [--limit N]

For each kernel compiled after MARK_FILE's modification time it prints how its metadata (compile
options) and its TTIR entry signature (argument types, divisibility, constants) differ from the
closest entry of that kernel compiled before: the field that differs is what the prewarm's
stand-in arguments or options got wrong.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
from pathlib import Path


def entries(cache: Path) -> list[dict]:
    found = []
    for meta in cache.glob("*/*.json"):
        if meta.name.startswith("__grp__"):
            continue
        try:
            data = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        ttir = meta.with_suffix(".ttir")
        signature = ""
        if ttir.exists():
            match = re.search(r"tt\.func public @\S+\((.*?)\)\s*(attributes|\{)", ttir.read_text(), re.S)
            signature = match.group(1) if match else ""
        found.append({"name": data.get("name", meta.stem), "meta": data, "sig": signature,
                      "mtime": meta.stat().st_mtime, "dir": meta.parent.name})
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cache")
    parser.add_argument("mark")
    parser.add_argument("--limit", type=int, default=6)
    args = parser.parse_args()
    mark = os.stat(args.mark).st_mtime
    all_entries = entries(Path(args.cache))
    old = [e for e in all_entries if e["mtime"] < mark]
    new = [e for e in all_entries if e["mtime"] >= mark]
    print(f"{len(old)} entries before the mark, {len(new)} after")
    for e in new[: args.limit]:
        same = [o for o in old if o["name"] == e["name"]]
        print(f"\n== {e['name']} ({e['dir']}): {len(same)} earlier entries of this kernel")
        if not same:
            continue
        closest = min(same, key=lambda o: sum(1 for a, b in zip(o["sig"], e["sig"], strict=False) if a != b)
                      + abs(len(o["sig"]) - len(e["sig"])))
        skip = {"hash", "shared", "tmem_size", "global_scratch_size", "profile_scratch_size"}
        for k in sorted(set(e["meta"]) | set(closest["meta"])):
            if k not in skip and e["meta"].get(k) != closest["meta"].get(k):
                print(f"  meta {k}: prewarm {closest['meta'].get(k)!r} launch {e['meta'].get(k)!r}")
        a = [s.strip() for s in closest["sig"].split(",")]
        b = [s.strip() for s in e["sig"].split(",")]
        for line in difflib.unified_diff(a, b, "prewarm", "launch", n=0, lineterm=""):
            print("  sig " + line[:200])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
