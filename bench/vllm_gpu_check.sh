#!/usr/bin/env bash
# vLLM's MRV2 verifier on a GPU machine without a package index: installs the pure-Python packages
# vLLM's import chain needs (carried wheels) and one vLLM version's Python sources, then runs
# `harness check --profile gpu` (coupled: the adapter reproduces vLLM's uniforms), the regression
# corpus replay and the insert-race hunt (bench/vllm_insert_race.py).
#
#   carry: .whl  (wheels: pip download ... -r .ci/vllm-requirements.txt, without those the GPU image
#                 already has: transformers, tokenizers, opencv, pillow, requests, ... -- docs/vllm.md)
#          .vllm (vllm-VERSION-py.tar.gz: the wheel's *.py files and dist-info; its CUDA .so files are
#                 built for another torch and the verification kernels do not need them)
#   usage: bash bench/vllm_gpu_check.sh OUT_DIR VERSION SEED [SEED ...]
#   env:   EXAMPLES (gpu profile --max-examples, default 8), CHECK_LIMIT (s per check, 200),
#          KERNELS (default "mrv2"; 0.34 also has mrv2_skip_masked), RACE_ROUNDS (default 6, 0 = off),
#          REPLAY_LIMIT and RACE_LIMIT (s, 150 each)
set -uo pipefail
out=${1:?out dir}; version=${2:?vllm version}; shift 2
seeds=("$@"); [ ${#seeds[@]} -gt 0 ] || seeds=(1)
site=/tmp/site; vsite=/tmp/vllm-$version
mkdir -p "$site" "$vsite" "$out"
if [ ! -f "$site/.installed" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl \
    >"$out/install.log" 2>&1 || { echo "wheel install failed"; tail -5 "$out/install.log"; exit 2; }
  touch "$site/.installed"
fi
[ -d "$vsite/vllm" ] || tar -xzf ".vllm/vllm-$version-py.tar.gz" -C "$vsite"
export PYTHONPATH="$PWD:$vsite:$site" PYTHONUNBUFFERED=1
python3 -c "from harness.adapters import vllm as a; a._import_vllm(); print('vllm', a.installed_version(), 'import ok;', a.IMPORT_NOTES)" 2>&1 \
  | grep -v "^W1" | tail -3
for k in ${KERNELS:-mrv2}; do
  for seed in "${seeds[@]}"; do
    start=$(date +%s)
    timeout "${CHECK_LIMIT:-200}" python3 -m harness check --kernel "harness.adapters.vllm:$k" --profile gpu \
      --seed "$seed" --max-examples "${EXAMPLES:-8}" --report "$out/$k-$version-$seed" >"$out/check-$k-$version-$seed.log" 2>&1
    echo "check $k $version seed $seed: exit $? in $(( $(date +%s) - start )) s"
    grep -E "^\S+ +[0-9] +(pass|fail|error|skipped|not claimed)" "$out/check-$k-$version-$seed.log" | awk '{print "   ", $0}' | cut -c1-160
    grep -E "^(PASS|FAIL|ERROR|NOTHING)" "$out/check-$k-$version-$seed.log" | cut -c1-300
  done
done
timeout "${REPLAY_LIMIT:-150}" python3 -m harness replay --kernel harness.adapters.vllm:mrv2 >"$out/replay-$version.log" 2>&1
echo "replay $version: exit $?"; grep -vE "^(pass|N/A) " "$out/replay-$version.log" | grep -v "^ " | cut -c1-220 | tail -8
if [ "${RACE_ROUNDS:-6}" -gt 0 ]; then
  timeout "${RACE_LIMIT:-150}" python3 bench/vllm_insert_race.py --rounds "${RACE_ROUNDS:-6}" >"$out/race-$version.log" 2>&1
  echo "insert race $version: exit $?"; tail -3 "$out/race-$version.log"
fi
