#!/usr/bin/env bash
# Issue 32 on one H200: how long a verdict takes, cold and warm, after the bounded variants.
#
#   bash bench/fast_verdicts_h200.sh OUT [STAGE ...]      (default: every stage, in this order)
#
# Stages (each fits in 10 minutes; they share Triton caches under $HOME/specfuzz-fv, so run them in
# order on one machine: a later stage reads the cache an earlier one filled):
#   check-cold    empty cache: `check --profile gpu --seed 1 --prewarm` (targets: <= 3 min cold)
#   check-warm    the same cache, no prewarm (target: <= 60 s warm)
#   keycheck      empty cache: bench/prewarm_keycheck.py on structural, law_consequences and
#                 coupled_exactness (KEYCHECK_ONLY): Triton's own keys a real launch adds after the
#                 prewarm's warmups, each beside the closest prewarmed key
#   check-seed2   the same cache, another seed (SEED2, drawn when unset), no prewarm: a second verdict
#   breakdown     bench/check_breakdown.py on that warm cache: per property kernel / build / oracle /
#                 other seconds, loads, keys (JSON with every key)
#   plan          the keys planned for the same seed (harness/compiles/planning.py), compared with the keys
#                 the breakdown saw launched: they must be equal property by property
#   cold-compile  empty cache, no prewarm: the breakdown of a cold run (Triton's compile hooks), cut
#                 at 9 minutes by --budget so it always reports
#   pytest-cold   empty cache: `pytest -n auto` (16 workers; conftest prewarms) (target: <= 5 min)
#   pytest-warm   the same cache (target: <= 2 min)
#   outside       empty cache: the outside-kernel check (vLLM's MRV2, if vllm imports) (<= 3 min cold)
# pytest stages run -v so that a stage cut by its limit still names each failed test in its log.
# STAGE_LIMIT=S caps each stage (default 570 s). Every stage writes OUT/<stage>.log and appends "<stage> <exit> <seconds>" to OUT/timings.txt.
set -u
out=${1:?usage: bash bench/fast_verdicts_h200.sh OUT [STAGE ...]}
shift
stages=${*:-check-cold check-warm breakdown plan cold-compile pytest-cold pytest-warm outside}
mkdir -p "$out"; out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD
base=$HOME/specfuzz-fv
# SEED=N fixes the root seed (default 1); SEED=random draws one, as a user's `check` does.
rand() { python3 -c 'import os; print(int.from_bytes(os.urandom(4), "little"))'; }
seed=${SEED:-1}; [ "$seed" = random ] && seed=$(rand)
seed2=${SEED2:-$(rand)}
echo "seeds: $seed $seed2" | tee -a "$out/timings.txt"

fresh() { rm -rf "$1"; mkdir -p "$1"; }

stage() {  # stage NAME COMMAND...: run with a 570 s limit, log, time
  local name=$1; shift
  local t0=$(date +%s.%N)
  timeout "${STAGE_LIMIT:-570}" "$@" > "$out/$name.log" 2>&1
  local code=$?
  local secs=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
  echo "$name $code $secs" | tee -a "$out/timings.txt"
}

for s in $stages; do
  case $s in
    check-cold)
      fresh "$base/check"
      TRITON_CACHE_DIR=$base/check stage check-cold python -m harness check --profile gpu --device cuda \
        --seed $seed --prewarm --report "$out/check-cold" ;;
    check-warm)
      TRITON_CACHE_DIR=$base/check stage check-warm python -m harness check --profile gpu --device cuda \
        --seed $seed --report "$out/check-warm" ;;
    keycheck)
      fresh "$base/keycheck"
      TRITON_CACHE_DIR=$base/keycheck stage keycheck python bench/prewarm_keycheck.py --seed $seed \
        --only ${KEYCHECK_ONLY:-structural law_consequences coupled_exactness} ;;
    check-seed2)
      TRITON_CACHE_DIR=$base/check stage check-seed2 python -m harness check --profile gpu --device cuda \
        --seed $seed2 --report "$out/check-seed2" ;;
    breakdown)
      TRITON_CACHE_DIR=$base/check stage breakdown python bench/check_breakdown.py --profile gpu \
        --device cuda --seed $seed --varied --json "$out/breakdown-warm.json" ;;
    plan)
      stage plan python bench/check_breakdown.py --plan-gpu --device cuda --seed $seed \
        --json "$out/plan.json"
      python3 - "$out/breakdown-warm.json" "$out/plan.json" <<'EOF' | tee "$out/plan-vs-real.txt"
import json, sys
real, plan = (json.load(open(p))[0]["rows"] for p in sys.argv[1:3])
plan = {r["property"]: set(r["key_list"]) for r in plan}
bad = 0
for r in real:
    got, want = set(r["key_list"]), plan.get(r["property"], set())
    ok = got == want
    bad += not ok
    print(f"{r['property']:34s} real {len(got):4d} planned {len(want):4d} {'same' if ok else 'DIFFER'}"
          + ("" if ok else f"  only real: {sorted(got - want)[:2]}  only planned: {sorted(want - got)[:2]}"))
print(f"{bad} properties differ")
EOF
      ;;
    cold-compile)
      fresh "$base/nowarm"
      TRITON_CACHE_DIR=$base/nowarm stage cold-compile python -m harness check --profile gpu --device cuda \
        --seed $seed --budget 9m --report "$out/cold-compile"
      fresh "$base/nowarm2"
      TRITON_CACHE_DIR=$base/nowarm2 stage cold-breakdown python bench/check_breakdown.py --profile gpu \
        --device cuda --seed $seed --only structural coupled_exactness --json "$out/breakdown-cold.json" ;;
    pytest-cold)
      fresh "$base/pytest"
      TRITON_CACHE_DIR=$base/pytest stage pytest-cold python -m pytest -n auto -v -p no:cacheprovider ;;
    pytest-warm)
      TRITON_CACHE_DIR=$base/pytest stage pytest-warm python -m pytest -n auto -v -p no:cacheprovider ;;
    outside)
      fresh "$base/outside"
      if python -c "import vllm" 2>/dev/null; then
        TRITON_CACHE_DIR=$base/outside stage outside python -m harness check \
          --kernel harness.adapters.vllm:mrv2 --profile gpu --device cuda --seed $seed --report "$out/outside"
      else
        echo "outside skipped: vllm does not import" | tee -a "$out/timings.txt"
      fi ;;
    *) echo "unknown stage $s" >&2; exit 2 ;;
  esac
done
