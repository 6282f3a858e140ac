#!/usr/bin/env bash
# The H200 runs that issues 31-38 still wait for, one stage per device call (each fits the 600 s
# limit of a call on a warm machine; logs under OUT). Run from the repository root, PYTHONPATH=.:
#
#   bash bench/h200_backlog.sh STAGE OUT
#
# Stages:
#   kernels   issue 34: outputs bit for bit against the tree before the knob removal (needs an
#             untracked before/kernels made here first: mkdir before && git archive eb2bf6a kernels |
#             tar -x -C before), the GPU kernel tests, and the coupled check (seed 340)
#   faults    issue 38: the CUDA out-of-bounds kernel ends as a crash finding; supervision overhead
#   golden    issue 35: record and diff times, gpu profile, our kernels
#   breakdown issue 32: bench/fast_verdicts_h200.sh (its own stages: check cold/warm with prewarm,
#             the breakdown, planned vs launched keys, pytest -n auto cold/warm, the outside kernel)
#   vllm      issues 36 and 43: vLLM 0.34.0's coupled check and bench/vs_vllm.py against it (carry
#             .whl and .vllm, see bench/vllm_gpu_check.sh)
set -uo pipefail
stage=${1:?stage}; out=${2:?out dir}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t() { local name=$1; shift; local s=$(date +%s); "$@" >"$out/$name.log" 2>&1; local rc=$?
      echo "$name: exit $rc in $(( $(date +%s) - s )) s"; tail -4 "$out/$name.log" | cut -c1-200; }
case $stage in
  kernels)
    [ -d before/kernels ] || { echo "before/kernels missing (see the header)"; exit 2; }
    PYTHONPATH=before python bench/bitexact.py >"$out/bitexact-before.txt" 2>"$out/bitexact-before.err"
    python bench/bitexact.py >"$out/bitexact-after.txt" 2>"$out/bitexact-after.err"
    diff "$out/bitexact-before.txt" "$out/bitexact-after.txt" >/dev/null && echo "bitexact: identical" \
      || echo "bitexact: DIFFERENT ($(wc -l <"$out/bitexact-after.txt") cases)"
    t kernel-tests timeout 330 python -m pytest -q -n 8 -p no:cacheprovider tests/kernels/test_gpu.py \
      tests/kernels/test_fused_decide.py tests/kernels/test_race_prune.py tests/kernels/test_call_plan.py \
      tests/kernels/test_launch_variants.py tests/kernels/test_launch.py tests/kernels/test_coupled.py \
      tests/kernels/test_pass1_tail.py tests/kernels/test_chunking.py tests/kernels/test_fallback.py
    t coupled timeout 150 python -m harness check --profile gpu --only coupled_exactness --seed 340 --max-examples 8 ;;
  faults)
    t oob timeout 200 python -m harness check --kernel harness.broken.cuda_oob_store:kernel --device cuda \
      --profile gpu --seed 0 --max-examples 20 --only structural coupled_exactness --report "$out/oob"
    t overhead timeout 300 python bench/supervision_overhead.py --device cuda --cases 40 --repeat 20 ;;
  golden)
    t record timeout 250 python -m harness record --profile gpu --seed 1 --out "$out/golden.json.gz"
    t diff timeout 250 python -m harness diff --against "$out/golden.json.gz" --json "$out/diff.json" ;;
  breakdown)
    shift 2; bash bench/fast_verdicts_h200.sh "$out" "$@" ;;
  vllm)
    bash bench/vllm_gpu_check.sh "$out/v34" 0.34.0 102 >"$out/v34.log" 2>&1; tail -20 "$out/v34.log"
    t vs-vllm timeout 280 env PYTHONPATH="$PWD:/tmp/vllm-0.34.0:/tmp/site" python bench/vs_vllm.py --quick \
      --json "$out/vs_vllm.json" ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
