#!/usr/bin/env bash
# The pre-merge check of .github/workflows/gpu-premerge.yml, by hand on a GPU machine (docs/ci.md):
# check (gpu profile), replay of the regression corpus, then the differential: a golden file
# recorded on the merge base with BASE_REF (a temporary git worktree) and diffed on this working
# tree, uncommitted changes included.
#
#   usage: bash bench/premerge.sh [BASE_REF (default main)] [OUT_DIR (default out)]
#   env:   KERNEL (default our Triton kernels), PROFILE (gpu), DEVICE (cuda), SEED (golden seed, 1),
#          BUDGET (the check's --budget, 15m: what it does not reach fails the check under --strict),
#          REQUIRE_IDENTICAL=1 to count "outputs changed, all legal" (diff exit 3) as a failure
#   exit:  0 all passed, 1 something failed (the summary at the end says what)
set -uo pipefail
base_ref=${1:-main}
mkdir -p "${2:-out}/diff" && out=$(cd "${2:-out}" && pwd)
kernel=${KERNEL:-harness.adapters.triton_kernels:kernel}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
base=$(git merge-base HEAD "$base_ref") || { echo "no merge base with $base_ref"; exit 2; }
declare -A verdict

python -m harness check --kernel "$kernel" --profile "${PROFILE:-gpu}" --device "${DEVICE:-cuda}" --prewarm --budget "${BUDGET:-15m}" --strict --report "$out/check"
verdict[check]=$?

python -m harness replay --kernel "$kernel" --device "${DEVICE:-cuda}" 2>&1 | tee "$out/replay.txt"
verdict[replay]=${PIPESTATUS[0]}

tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" 2>/dev/null; rm -rf "$tmp"' EXIT
git worktree add --quiet --detach "$tmp/base" "$base"
(cd "$tmp/base" && PYTHONPATH="$PWD" python -m harness record --kernel "$kernel" --profile "${PROFILE:-gpu}" --seed "${SEED:-1}" --device "${DEVICE:-cuda}" --out "$out/diff/golden-base.json.gz")
verdict[record]=$?
if [ "${verdict[record]}" = 0 ]; then
  python -m harness diff --against "$out/diff/golden-base.json.gz" --kernel "$kernel" --device "${DEVICE:-cuda}" --json "$out/diff/diff.json" | tee "$out/diff/diff.txt"
  verdict[diff]=${PIPESTATUS[0]}
fi

echo "--- pre-merge against ${base:0:12} ($base_ref); reports in $out"
status=0
for step in check replay record diff; do
  code=${verdict[$step]:-skipped}
  case "$step:$code" in
    *:0) note="pass" ;;
    diff:3) note="outputs changed, every new answer legal (read $out/diff/diff.txt)"
            [ "${REQUIRE_IDENTICAL:-0}" = 1 ] && status=1 ;;
    diff:1) note="a new answer is wrong ($out/diff/diff.json)"; status=1 ;;
    diff:2) note="usage error or the case set changed: the diff could not judge"; status=1 ;;
    *:skipped) note="skipped" ;;
    *) note="failed"; status=1 ;;
  esac
  printf '%-7s exit %-7s %s\n' "$step" "$code" "$note"
done
exit $status
