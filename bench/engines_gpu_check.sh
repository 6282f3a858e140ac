#!/usr/bin/env bash
# FlashInfer 0.7.4 and SGLang sglang-kernel 0.4.6 on a GPU machine without a package index (docs/engines.md):
# installs the carried files into /tmp/site, builds FlashInfer's sampling module once (timed; skipped when
# a prebuilt .engines/sampling.so is carried), loads SGLang's sm90 op library, then per engine runs
# `harness check --profile gpu` for two seeds, `harness replay` of the corpus and bench/engine_repros.py.
# SGLang's checks run beside FlashInfer's build and checks (one GPU, two processes). Ends with
# OUT/engines-logs.tar.gz (every log and report) and OUT/sampling.so (the built module, to carry next time).
#
#   carry: .engines (wheels/, flashinfer-0.7.4-sampling.tar.gz, sglang-kernel-0.4.6-sm90.tar.gz,
#          optionally sampling.so)
#   usage: bash bench/engines_gpu_check.sh OUT_DIR      (env: SEEDS="101 102" EXAMPLES=6 BUDGET=60s)
set -uo pipefail
out=${1:?out dir}; seeds=(${SEEDS:-101 102}); examples=${EXAMPLES:-6}; budget=${BUDGET:-60s}
site=/tmp/site; carry=.engines
mkdir -p "$site" "$out"
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
export PYTHONPATH="$PWD:$site" PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/fi-workspace}  # its JIT cache: .cache/flashinfer/
export PATH="$CUDA_HOME/bin:$PATH" FLASHINFER_NVCC_THREADS=${FLASHINFER_NVCC_THREADS:-4} MAX_JOBS=${MAX_JOBS:-16}

# 1. install what the image lacks (pure-Python wheels only where the import fails) and the two trees
for pair in tvm_ffi:apache_tvm_ffi pynvml:nvidia_ml_py requests:requests urllib3:urllib3 idna:idna \
            charset_normalizer:charset_normalizer certifi:certifi filelock:filelock jinja2:jinja2 \
            markupsafe:markupsafe packaging:packaging; do
  python3 -c "import ${pair%%:*}" 2>/dev/null && continue
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$carry"/wheels/"${pair#*:}"-*.whl \
    >>"$out/install.log" 2>&1 || echo "install of ${pair#*:} failed (see install.log)"
done
tar -xzf "$carry/flashinfer-0.7.4-sampling.tar.gz" -C "$site" && tar -xzf "$carry/sglang-kernel-0.4.6-sm90.tar.gz" -C "$site"
if [ -f "$carry/sampling.so" ]; then
  mkdir -p "$site/flashinfer/data/aot/sampling" && cp "$carry/sampling.so" "$site/flashinfer/data/aot/sampling/"
  export FLASHINFER_DISABLE_JIT=1
fi
say "installed: $(ls "$site" | tr '\n' ' ' | cut -c1-200)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1

check() {  # engine seed
  local name=$1 seed=$2 start=$(date +%s)
  timeout $(( ${budget%s} + 60 )) python3 -m harness check --kernel "harness.adapters.$name:chain" --profile gpu \
    --seed "$seed" --max-examples "$examples" --budget "$budget" --report "$out/$name-$seed" \
    >"$out/check-$name-$seed.log" 2>&1
  local rc=$?
  { echo "check $name seed $seed: exit $rc in $(( $(date +%s) - start )) s"
    grep -E "^\S+ +[0-9] +(pass|fail|error|skipped|not claimed)" "$out/check-$name-$seed.log" | cut -c1-150
    tail -3 "$out/check-$name-$seed.log" | cut -c1-300; } >"$out/summary-$name-$seed.txt"
}

# 2. SGLang: load the op library, then its checks in the background
python3 -c "from harness.adapters import sglang as s; print('sglang:', s.sglang_available() or 'loaded', s.IMPORT_NOTES)" \
  >"$out/sglang-load.log" 2>&1
say "$(tail -2 "$out/sglang-load.log" | cut -c1-300)"
( for s in "${seeds[@]}"; do check sglang "$s"; done ) &
sglang_jobs=$!

# 3. FlashInfer: the one-time build (the first call compiles sampling.cu, renorm.cu and the binding)
start=$(date +%s)
timeout 300 python3 - >"$out/flashinfer-build.log" 2>&1 <<'EOF'
import glob, shutil, sys, time, torch
from harness.adapters import flashinfer as f
why = f.flashinfer_available()
print("flashinfer:", why or "importable", f.IMPORT_NOTES)
if why:
    sys.exit(1)
began = time.perf_counter()
probs = f._api().softmax(torch.zeros(1, 8, device="cuda"), temperature=torch.ones(1, device="cuda"))
torch.cuda.synchronize()
print(f"sampling module ready in {time.perf_counter() - began:.1f} s", probs.sum().item())
import os
for path in glob.glob(os.environ["FLASHINFER_WORKSPACE_BASE"] + "/.cache/flashinfer/**/sampling.so", recursive=True):
    print("built:", path)
EOF
say "flashinfer build: exit $? in $(( $(date +%s) - start )) s: $(grep -E 'ready|flashinfer:' "$out/flashinfer-build.log" | tr '\n' ' ' | cut -c1-300)"
so=$(ls "$FLASHINFER_WORKSPACE_BASE"/.cache/flashinfer/*/*/cached_ops/sampling/sampling.so 2>/dev/null | head -1)
[ -n "$so" ] && cp "$so" "$out/sampling.so"
for s in "${seeds[@]}"; do check flashinfer "$s"; done
wait $sglang_jobs

# 4. the corpus and the targeted reproductions
for name in flashinfer sglang; do
  timeout 90 python3 -m harness replay --kernel "harness.adapters.$name:chain" >"$out/replay-$name.log" 2>&1 &
done
wait
timeout 120 python3 bench/engine_repros.py --json "$out/repros.json" >"$out/repros.log" 2>&1

# 5. summary and one archive
say "done"
cat "$out"/summary-*.txt
for name in flashinfer sglang; do
  echo "replay $name: $(grep -cE '^KNOWN' "$out/replay-$name.log") KNOWN lines; the rest:"
  grep -vE "^(pass|N/A) " "$out/replay-$name.log" | cut -c1-200 | tail -8
done
cat "$out/repros.log"
tar -czf "$out/engines-logs.tar.gz" -C "$out" --exclude engines-logs.tar.gz --exclude sampling.so .
