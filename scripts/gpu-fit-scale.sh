#!/usr/bin/env bash
# Issue 39's GPU acceptance, in one device call (after scripts/build-device.sh here):
#   run(command="scripts/gpu-fit-scale.sh", carry=[".device"])
# scripts/fit_scale_check.py: resnet50 traced at batch 16 and 32, predicted at 64, 128 and 256
# against real runs; GPT-2 at 4 and 8 -> 32; the retry count under caps against capped runs.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/device-env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 scripts/fit_scale_check.py "$MEMPROF_BIN" "${OUT:-/tmp}"
