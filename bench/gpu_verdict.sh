#!/usr/bin/env bash
# The GPU verdict, timed (issue 49): on one GPU machine, in one run of at most 10 minutes,
#   check-cold   python -m harness check --profile gpu, empty Triton cache, seed A   (target <= 180 s)
#   check-warm   the same command again on the filled cache                         (target <= 60 s)
#   check-seed2  another seed B on that cache                                       (target <= 90 s)
#   pytest-cold  pytest -n auto on another empty cache                              (target <= 300 s)
# then prints one table: stage, seconds, properties reached (a pass or fail verdict, of those
# claimed), statistical properties reached, failures; pytest: tests passed / failed. Every log,
# report and the table go to OUT. Triton-keylog (KEYLOG) is used in the check stages when
# TRITON_KEYLOG_DIR names it; OUT/<stage>.misses then lists the keys a check compiled itself that
# no prewarm warm-up and no earlier check stage built (the plan's misses), and the table counts them.
#
# Each stage is cut at its target (pytest with SIGINT, so it still prints its failures; check with
# SIGTERM, so it still writes its report): a cut stage is a missed target. OUT gets table.txt and
# verdict.tgz (every log, report and key log: a device run returns few files).
#
#   usage: bash bench/gpu_verdict.sh OUT [STAGE ...]
#          (default: pytest-cold check-cold check-warm check-seed2: pytest first, so that the
#          verdict on the suite is whole even when the check stages run out of time)
#   env:   SEED_A (default 11), SEED_B (default 12), DEADLINE_S (default 590: stages are cut to fit)
set -uo pipefail
out=${1:?out dir}; shift
stages=("$@"); [ ${#stages[@]} -gt 0 ] || stages=(pytest-cold check-cold check-warm check-seed2)
seed_a=${SEED_A:-11}; seed_b=${SEED_B:-12}; deadline=${DEADLINE_S:-590}
work=$(mktemp -d /tmp/gpu-verdict.XXXX)
final=$out; out=$work/out
mkdir -p "$out" "$final"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# the key logger only in check stages: under pytest its hook breaks Triton 3.6's JIT-function constexprs
keylog_path=${TRITON_KEYLOG_DIR:+$TRITON_KEYLOG_DIR:}
t0=$(date +%s)
declare -A limit=([check-cold]=180 [check-warm]=60 [check-seed2]=90 [pytest-cold]=300)
declare -A signal=([check-cold]=TERM [check-warm]=TERM [check-seed2]=TERM [pytest-cold]=INT)
: >"$out/stages.tsv"

run_stage() {  # name limit_s cache_dir command...
  local name=$1 cap=$2 cache=$3; shift 3
  local left=$(( deadline - ($(date +%s) - t0) ))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -le 5 ]; then printf '%s\tnot run (no time left)\n' "$name" >>"$out/stages.tsv"; return; fi
  echo "== $name (limit ${cap}s) $*"
  local start; start=$(date +%s.%N)
  TRITON_CACHE_DIR=$cache KEYLOG=$out/$name.keylog timeout -s "${signal[$name]}" -k 20 "$cap" "$@" \
    >"$out/$name.log" 2>&1
  local rc=$?
  local took; took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  printf '%s\t%s\t%s\t%s\n' "$name" "$took" "$rc" "$cap" >>"$out/stages.tsv"
  tail -n 4 "$out/$name.log"
}

check() {  # name seed cache
  run_stage "$1" "${limit[$1]}" "$3" env PYTHONPATH="$keylog_path$PYTHONPATH" python3 -m harness check --profile gpu --device cuda --seed "$2" \
    --report "$out/$1"
}

for stage in "${stages[@]}"; do
  case $stage in
    check-cold) rm -rf "$work/cache"; check check-cold "$seed_a" "$work/cache" ;;
    check-warm) check check-warm "$seed_a" "$work/cache" ;;
    check-seed2) check check-seed2 "$seed_b" "$work/cache" ;;
    pytest-cold) rm -rf "$work/cache-pytest"
      run_stage pytest-cold "${limit[pytest-cold]}" "$work/cache-pytest" \
        python3 -m pytest -n auto -q -rfE --tb=short -p no:cacheprovider --junitxml "$out/pytest-cold.xml" ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done

python3 - "$out" <<'EOF'
import json, os, re, sys
import xml.etree.ElementTree as ET

out = sys.argv[1]
STATISTICAL = {"conditional_law", "marginal_law", "first_token_law", "expected_accepted", "block_dominates_token"}
rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(out, "stages.tsv")) if line.strip()]
lines = [f"{'stage':<13} {'seconds':>8} {'limit':>6} {'exit':>4}  {'reached':<22} {'statistical':<12} failures"]
for row in rows:
    name = row[0]
    if len(row) < 4:
        lines.append(f"{name:<13} {row[1]}")
        continue
    took, rc, cap = row[1], row[2], row[3]
    reached = stat = fails = "-"
    report = os.path.join(out, name, "report.json")
    junit = os.path.join(out, f"{name}.xml")
    if os.path.exists(report):
        props = json.load(open(report))["properties"]
        ran = [p for p in props if p["verdict"] != "not claimed"]
        never = [n for p in props for n in re.findall(r"'(\w+)'", p["note"].partition("not run:")[2])]
        done = [p for p in ran if p["verdict"] in ("pass", "fail")]
        stats = [p for p in ran if p.get("layer") == 4]
        claimed = len(ran) + len(never)
        stat_never = sum(n in STATISTICAL for n in never)
        reached = f"{len(done)} of {claimed} claimed"
        stat = f"{sum(p in done for p in stats)} of {len(stats) + stat_never}"
        # the property the stage's time limit cut reads "error: interrupted": a missed target, not a failure
        bad = [p["name"] for p in ran if p["verdict"] == "fail"
               or (p["verdict"] == "error" and not p["note"].startswith("interrupted"))]
        fails = f"{len(bad)} {' '.join(bad)}".strip()
    elif name.startswith("pytest"):
        log = open(os.path.join(out, f"{name}.log"), errors="replace").read()
        counts = dict((k, int(v)) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", log[-3000:]))
        reached = f"{counts.get('passed', 0)} passed, {counts.get('skipped', 0)} skipped"
        fails = str(counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0))
        if not os.path.exists(junit):
            reached += " (cut)"
    elif os.path.exists(junit):
        suite = ET.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        total, failed, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
        reached = f"{total - failed - errors - skipped} passed, {skipped} skipped"
        fails = str(failed + errors)
    elif rc != "0":
        fails = "no report (see log)"
    lines.append(f"{name:<13} {took:>8} {cap:>6} {rc:>4}  {reached:<22} {stat:<12} {fails}")
seen = set()  # keys built so far in the check stages' cache: warm-ups and the checks' own compiles
def misses(name):
    """The check's own compiles of keys that no warm-up and no earlier check stage built."""
    path = os.path.join(out, f"{name}.keylog")
    if not os.path.exists(path):
        return None
    recs = [json.loads(line) for line in open(path) if line.strip()]
    recs = [r for r in recs if "name" in r]
    ident = lambda r: (r["name"], r["sig"], r["const"], tuple(sorted(
        (k, v) for k, v in r["opts"].items() if k not in ("is_warmup", "specialization_data"))))
    seen.update(ident(r) for r in recs if r["warmup"])  # ident: without is_warmup and the raw key
    real = {ident(r): r for r in recs if not r["warmup"]}
    missed = [r for k, r in real.items() if k not in seen]
    seen.update(real)
    with open(os.path.join(out, f"{name}.misses"), "w") as f:
        for r in missed:
            f.write(json.dumps({k: r[k] for k in ("name", "sig", "const", "opts")}) + "\n")
    return len(missed), len(real)
for i, row in enumerate(rows):
    got = misses(row[0]) if row[0].startswith("check") else None
    if got is not None:
        lines[i + 1] += f"  [{got[0]} of {got[1]} launched keys compiled unplanned]"
table = "\n".join(lines)
print(table)
open(os.path.join(out, "table.txt"), "w").write(table + "\n")
EOF
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  date -u +%F; git rev-parse --short HEAD 2>/dev/null; } >"$out/card.txt"
cat "$out/card.txt" | tee -a "$out/table.txt"
cp "$out/table.txt" "$final/table.txt"
tar -czf "$final/verdict.tgz" -C "$work" out
