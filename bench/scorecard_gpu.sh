#!/usr/bin/env bash
# The outside verifiers' scorecard rows (docs/scorecard.md, issue 50) in one GPU run: FlashInfer 0.7.4
# `chain`, SGLang sglang-kernel 0.4.6 `chain`, vLLM 0.34.0 `mrv2` and `mrv2_skip_masked`, each
# `harness check --profile gpu` for two seeds side by side with no budget (every claimed property runs to its end,
# or the run's deadline cuts it and the report says so), the regression corpus replays, the targeted
# reproductions (bench/engine_repros.py) and the upstream reports' standalone scripts
# (bench/engine_repros.py --upstream). The four verifiers run side by side on the one GPU (their time
# is host work: Hypothesis, the float64 oracle); FlashInfer builds its sampling module first. Beside
# them, bench/prewarm_keycheck.py --calls compares our kernels' planned and real calls (CALLS_ONLY,
# CALLS_MODES: in-process and/or supervised).
#
#   carry: .engines (docs/engines.md) for FlashInfer and SGLang, .whl and .vllm (docs/vllm.md) for vLLM:
#          together over a device call's 64 MiB, so run the engines and vLLM as two calls (JOBS)
#   usage: bash bench/scorecard_gpu.sh OUT      env: SEEDS="101 102" EXAMPLES=6 DEADLINE_S=400
#          JOBS="sglang flashinfer vllm-mrv2 vllm-mrv2_skip_masked ours calls" (any of them; default all)
# OUT gets scorecard-logs.tgz (every log and report.json) and summary.txt (one line per check): a
# device run returns only a few files.
set -uo pipefail
final=${1:?out dir}; seeds=(${SEEDS:-101 102}); examples=${EXAMPLES:-6}; deadline=${DEADLINE_S:-400}
jobs=" ${JOBS:-sglang flashinfer vllm-mrv2 vllm-mrv2_skip_masked ours calls} "
out=$(mktemp -d /tmp/scorecard.XXXX); mkdir -p "$final"
want() { [[ $jobs == *" $1 "* ]]; }
site=/tmp/site; vsite=/tmp/vsite; vtree=/tmp/vllm-0.34.0
mkdir -p "$site" "$vsite" "$vtree" "$out"
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( deadline - ($(date +%s) - t0) )); }
export PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export FLASHINFER_WORKSPACE_BASE=/tmp/fi-workspace PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
export FLASHINFER_NVCC_THREADS=4 MAX_JOBS=8 TRITON_CACHE_DIR=/tmp/scorecard-triton

# 1. install: the engines' trees and missing wheels (docs/engines.md), vLLM's sources and wheels
for pair in tvm_ffi:apache_tvm_ffi pynvml:nvidia_ml_py requests:requests urllib3:urllib3 idna:idna \
            charset_normalizer:charset_normalizer certifi:certifi filelock:filelock jinja2:jinja2 \
            markupsafe:markupsafe packaging:packaging; do
  python3 -c "import ${pair%%:*}" 2>/dev/null && continue
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .engines/wheels/"${pair#*:}"-*.whl \
    >>"$out/install.log" 2>&1 || echo "install of ${pair#*:} failed"
done
if [ -d .engines ]; then
  tar -xzf .engines/flashinfer-0.7.4-sampling.tar.gz -C "$site" && tar -xzf .engines/sglang-kernel-0.4.6-sm90.tar.gz -C "$site"
fi
if [ -d .vllm ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$vsite" .whl/*.whl \
    >>"$out/install.log" 2>&1 || echo "vllm wheels: install failed (install.log)"
  tar -xzf .vllm/vllm-0.34.0-py.tar.gz -C "$vtree"
fi
engines_path="$PWD:$site"; vllm_path="$PWD:$vtree:$vsite"
say "installed"

check() {  # label pythonpath spec seed
  local label=$1 path=$2 spec=$3 seed=$4 start=$(date +%s) cap; cap=$(left)
  if [ "$cap" -le 20 ]; then echo "check $label seed $seed: not run (deadline)" >>"$out/summary.txt"; return; fi
  PYTHONPATH=$path timeout -s TERM -k 15 "$cap" python3 -m harness check --kernel "$spec" --profile gpu \
    --seed "$seed" --max-examples "$examples" --report "$out/$label-$seed" >"$out/check-$label-$seed.log" 2>&1
  echo "check $label seed $seed: exit $? in $(( $(date +%s) - start )) s: $(grep -E '^(PASS|FAIL|ERROR|NOTHING)' \
    "$out/check-$label-$seed.log" | cut -c1-250)" >>"$out/summary.txt"
}
replay() {  # label pythonpath spec
  local cap; cap=$(left); [ "$cap" -le 20 ] && return
  PYTHONPATH=$2 timeout "$(( cap < 120 ? cap : 120 ))" python3 -m harness replay --kernel "$3" >"$out/replay-$1.log" 2>&1
  echo "replay $1: exit $?; $(grep -cE '^KNOWN' "$out/replay-$1.log") KNOWN; other: $(grep -vE '^(pass|N/A|KNOWN) ' \
    "$out/replay-$1.log" | grep -v '^ ' | tail -3 | tr '\n' '|' | cut -c1-300)" >>"$out/summary.txt"
}

# 2. side by side: SGLang; FlashInfer (build, then checks); vLLM mrv2; vLLM mrv2_skip_masked
want sglang && ( for s in "${seeds[@]}"; do check sglang "$engines_path" harness.adapters.sglang:chain "$s" & done; wait
  replay sglang "$engines_path" harness.adapters.sglang:chain ) &
want flashinfer && ( start=$(date +%s)
  PYTHONPATH=$engines_path timeout 240 python3 -c "
import time, torch
from harness.adapters import flashinfer as f
print('flashinfer:', f.flashinfer_available() or 'importable', f.IMPORT_NOTES)
began = time.perf_counter()
f._api().softmax(torch.zeros(1, 8, device='cuda'), temperature=torch.ones(1, device='cuda'))
torch.cuda.synchronize(); print(f'sampling module ready in {time.perf_counter() - began:.1f} s')" >"$out/flashinfer-build.log" 2>&1
  echo "flashinfer build: exit $? in $(( $(date +%s) - start )) s: $(tail -1 "$out/flashinfer-build.log" | cut -c1-200)" >>"$out/summary.txt"
  for s in "${seeds[@]}"; do check flashinfer "$engines_path" harness.adapters.flashinfer:chain "$s" & done; wait
  replay flashinfer "$engines_path" harness.adapters.flashinfer:chain
  PYTHONPATH=$engines_path timeout 150 python3 bench/engine_repros.py --json "$out/repros.json" >"$out/repros.log" 2>&1
  PYTHONPATH=$engines_path timeout 150 python3 bench/engine_repros.py --upstream >"$out/upstream.log" 2>&1 ) &
want vllm-mrv2 && ( for s in "${seeds[@]}"; do check vllm-mrv2 "$vllm_path" harness.adapters.vllm:mrv2 "$s" & done; wait
  replay vllm-mrv2 "$vllm_path" harness.adapters.vllm:mrv2
  PYTHONPATH=$vllm_path timeout 150 python3 bench/engine_repros.py --upstream vllm >"$out/upstream-vllm.log" 2>&1 ) &
# ours, at the same examples and seeds as the outside columns (the prewarm on, as by default on a GPU)
want ours && ( for s in "${seeds[@]}"; do check ours "$PWD" harness.adapters.triton_kernels:kernel "$s" & done; wait ) &
want vllm-mrv2_skip_masked && ( for s in "${seeds[@]}"; do check vllm-mrv2_skip_masked "$vllm_path" harness.adapters.vllm:mrv2_skip_masked "$s" & done; wait ) &
# our kernels: do planned and real calls part (issue 49's plan misses; bench/prewarm_keycheck.py --calls)
want calls && ( for mode in ${CALLS_MODES:-in-process supervised}; do
    cap=$(left); [ "$cap" -le 30 ] && break
    flag=""; [ "$mode" = supervised ] && flag=--supervised
    PYTHONPATH=$PWD TRITON_CACHE_DIR=/tmp/calls-triton timeout "$cap" python3 bench/prewarm_keycheck.py --seed 11 \
      --calls --only ${CALLS_ONLY:-law_consequences point_mass_identity} $flag >>"$out/calls.log" 2>&1
  done ) &
wait
say "done"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 >>"$out/summary.txt"
sort "$out/summary.txt"; cat "$out/repros.log" "$out/upstream.log" "$out/upstream-vllm.log" "$out/calls.log" 2>/dev/null | grep -v Warning | cut -c1-400
cp "$out/summary.txt" "$final/"
tar -czf "$final/scorecard-logs.tgz" -C "$out" .
