#!/usr/bin/env bash
# Sets everything up, then profiles the example training step (on the GPU if there is one).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"
set -x
target/release/memprof run -f train_step examples/train.py --steps 3
target/release/memprof run --modules --depth 2 --suggest-checkpoints 2 examples/train.py --steps 3
