#!/usr/bin/env bash
# Issue 23's GPU acceptance, in one device call (after scripts/build-device.sh here):
#   run(command="scripts/fit_check.sh", carry=[".device"])
# scripts/fit_check.py: memprof fit's predictions against real runs (resnet50, GPT-2, a
# fragmenting program; capped capacities; another batch size; the largest batch).
set -uo pipefail
cd "$(dirname "$0")/.."
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 scripts/fit_check.py "$PWD/.device/memprof" "${OUT:-/tmp}"
