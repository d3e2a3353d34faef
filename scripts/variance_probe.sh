#!/usr/bin/env bash
# A probe of run-to-run variance in a compiled step's own readings (not part of gpu-check):
# bare cold twice (each in a fresh inductor cache), bare warm three times, memprof ARGS warm twice.
#   run(command="scripts/variance_probe.sh --modules -- --model mlp --mode max-autotune-no-cudagraphs", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/../examples"
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
flags=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done; shift
r() { "$@" 2>/dev/null | grep '^readings' || echo "failed: $*"; }
for i in 1 2; do export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d); echo "bare cold $i: $(r python3 compiled_step.py "$@")"; done
for i in 1 2 3; do echo "bare warm $i: $(r python3 compiled_step.py "$@")"; done
for i in 1 2; do echo "memprof ${flags[*]} warm $i: $(r ../.device/memprof run "${flags[@]}" compiled_step.py "$@")"; done
