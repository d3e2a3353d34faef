#!/usr/bin/env bash
# The GPU acceptance run, in one device call (after scripts/build-device.sh here):
#   the whole integration suite on cuda:0, the GPU-only agreement checks, the OOM forensics
#   check, the peak against torch's own history (scripts/peak_check.py), compiled models'
#   readings with and without memprof (scripts/compiled_check.py; SKIP_COMPILED=1 leaves it out,
#   as it takes 6-7 minutes: run it alone then), and the demo.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/device-env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
# pytest for the suite's pytest-plugin tests (second_hour's limits), where the machine's venv
# lacks it: from the wheels scripts/build-device.sh packs into .device/pywheels (no registry there).
. scripts/device/venv-install.sh
if ! python3 -c 'import pytest' 2>/dev/null; then
  venv_install "$(command -v python3)" --no-index --find-links .device/pywheels pytest ||
    echo "gpu-check: pytest did not install: the pytest-plugin tests will fail"
fi
status=0
for t in .device/tests/*; do
  echo "== $(basename "$t") on cuda:0"
  "$t" --test-threads 4 || status=1
done
echo "== demo (the README's first example): memprof run examples/gpt2_train.py"
.device/memprof run examples/gpt2_train.py 2>&1 | tee "${OUT:-/tmp}/gpt2_demo.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "== demo: memprof run -f train_step examples/train.py --steps 3"
.device/memprof run -f train_step examples/train.py --steps 3 || status=1
# The module and tensor reports, saved (YAML, for the README's schema) and shown as tables.
out=${OUT:-/tmp}
echo "== demo: memprof run --modules --depth 2 --suggest-checkpoints 2 examples/train.py --steps 3"
.device/memprof run --modules --depth 2 --suggest-checkpoints 2 --format yaml -o "$out/modules.yaml" \
  examples/train.py --steps 3 && .device/memprof show "$out/modules.yaml" || status=1
echo "== demo: memprof run -f train_step --tensors examples/train.py --steps 2"
.device/memprof run -f train_step --tensors --format yaml -o "$out/tensors.yaml" \
  examples/train.py --steps 2 && .device/memprof show "$out/tensors.yaml" || status=1
echo "== OOM forensics: scripts/oom_check.py (fixtures/oom_cuda.py, capped at 3 GiB, no -f)"
python3 scripts/oom_check.py "$MEMPROF_BIN" "$out" || status=1
echo "== --history: scripts/history_check.py (examples/train.py, memory_viz's replay)"
python3 scripts/history_check.py "$MEMPROF_BIN" "$out" || status=1
echo "== the peak: scripts/peak_check.py (examples/gpt2_train.py, torch's history replayed)"
python3 scripts/peak_check.py "$MEMPROF_BIN" "$out" || status=1
echo "== the peak of compiled code: scripts/peak_check.py --compiled (compiled GPT-2, torch's history and its line maps)"
python3 scripts/peak_check.py "$MEMPROF_BIN" "$out" --compiled || status=1
if [ -z "${SKIP_COMPILED:-}" ]; then
  echo "== compiled models: scripts/compiled_check.py (examples/compiled_step.py: GPT-2, resnet50, reduce-overhead)"
  python3 scripts/compiled_check.py "$MEMPROF_BIN" "$out" || status=1
fi
echo "gpu-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
