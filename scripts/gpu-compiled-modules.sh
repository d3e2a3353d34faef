#!/usr/bin/env bash
# Compiled models' modules on the GPU (issue 25), in one device call after scripts/build-device.sh:
# the compiled and module tests on cuda:0, then `--modules --suggest-checkpoints 2` on a compiled
# GPT-2 124M step, a compiled resnet50 step and a reduce-overhead MLP (examples/compiled_step.py),
# each cold (a fresh inductor cache) and warm (from it): the compiled modules' rows, runs and saved
# bytes must be the same both ways (a cold compile's autotuning allocates more); the reports are
# kept in $OUT. The program's own readings with --modules are
# scripts/compiled_check.py's.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/device-env.sh
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
echo "== compiled::, modules:: and gpu:: tests on cuda:0"
.device/tests/integration --test-threads 4 compiled:: modules:: gpu:: >"$out/tests.log" 2>&1 || status=1
grep -E "FAILED|test result" "$out/tests.log"
grep -A12 "panicked" "$out/tests.log" | cut -c1-400 | head -60
cd examples
for model in ${MODELS:-gpt2 resnet50 mlp}; do
  cache=$(mktemp -d)
  for run in cold warm; do
    echo "== memprof run --modules --suggest-checkpoints 2 compiled_step.py --model $model ($run cache)"
    TORCHINDUCTOR_CACHE_DIR=$cache ../.device/memprof run --modules --suggest-checkpoints 2 \
      --format json -o "$out/$model-modules-$run.json" compiled_step.py --model $model \
      >"$out/$model-$run.log" 2>&1 || { status=1; tail -5 "$out/$model-$run.log"; }
  done
  ../.device/memprof show "$out/$model-modules-warm.json" | sed -n '/^Compiled modules/,$p' | head -60
  python3 - "$out/$model-modules-cold.json" "$out/$model-modules-warm.json" <<'PY' || status=1
import json, sys
# A cold compile autotunes (its kernels run on copies of their buffers), so the bytes allocated
# (and, under CUDA graphs, the part of them in the pools) may differ; the rows, runs, saved bytes
# and which rows have pool bytes may not.
BYTES = ("allocations", "allocated_bytes", "pool_bytes")
def rows(path):
    rows = json.load(open(path))["modules"].get("compiled_modules") or []
    return [dict({k: v for k, v in r.items() if k not in BYTES}, pooled="pool_bytes" in r) for r in rows]
cold, warm = (rows(p) for p in sys.argv[1:])
ok = bool(cold) and cold == warm
print("compiled modules (runs, saved, pooled) cold == warm:", ok, len(cold), "rows")
sys.exit(0 if ok else 1)
PY
done
echo "gpu-compiled-modules: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
