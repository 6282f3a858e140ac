#!/usr/bin/env bash
# The vLLM adapters on a GPU machine without a package index (the H200 of docs/vllm.md): installs
# vLLM's Python sources and the missing pure-Python packages from carried files, then runs
# `harness check --profile gpu` for each adapter and replays the regression corpus on it.
#
#   carry: .whl (wheels: pip download ... -r .ci/vllm-requirements.txt, those the image lacks)
#          .vllm (vllm-0.33.0-py.tar.gz: the wheel's *.py files and dist-info; its CUDA .so files
#                 are built for another torch and are not needed by the verification kernels)
#   usage: bash bench/vllm_gpu_check.sh OUT_DIR SEED [MAX_EXAMPLES] [KERNELS...]
set -uo pipefail
out=${1:?out dir}; seed=${2:?seed}; examples=${3:-10}; shift 3 || true
kernels=("${@:-mrv2 v1}")
site=/tmp/site
mkdir -p "$site" "$out"
if [ ! -d "$site/vllm" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl \
    >"$out/install.log" 2>&1 || { echo "wheel install failed"; tail -5 "$out/install.log"; exit 2; }
  tar -xzf .vllm/vllm-0.33.0-py.tar.gz -C "$site"
fi
export PYTHONPATH="$PWD:$site" PYTHONUNBUFFERED=1
python3 -c "from harness.adapters import vllm as a; a._import_vllm(); print('vllm import ok', a.IMPORT_NOTES)" 2>&1 \
  | grep -v "^W1" | tail -4
for k in ${kernels[*]}; do
  start=$(date +%s)
  timeout ${CHECK_LIMIT:-280} python3 -m harness check --kernel "harness.adapters.vllm:$k" --profile gpu --seed "$seed" \
    --max-examples "$examples" --report "$out/$k-$seed" >"$out/check-$k-$seed.log" 2>&1
  echo "check $k seed $seed: exit $? in $(( $(date +%s) - start )) s"
  grep -E "^\S+ +[0-9] +(pass|fail|error|skipped|not claimed)" "$out/check-$k-$seed.log" | awk '{print "   ", $0}' | cut -c1-150
done
if [ "${REPLAY:-1}" = 1 ]; then
  for k in ${kernels[*]}; do
    timeout ${REPLAY_LIMIT:-150} python3 -m harness replay --kernel "harness.adapters.vllm:$k" >"$out/replay-$k.log" 2>&1
    echo "replay $k: exit $?"; grep -vE "^(pass|N/A) " "$out/replay-$k.log" | cut -c1-220 | tail -12
  done
fi
