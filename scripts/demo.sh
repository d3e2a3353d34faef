#!/usr/bin/env bash
# Sets everything up, then profiles the example training step (on the GPU if there is one).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"
# GPT-2 124M on the GPU; a small one on the CPU (the same loop).
small=()
python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
  small=(--layers 2 --embd 128 --heads 4 --batch 4 --seq 128 --vocab 4096 --steps 3)
set -x
target/release/memprof run examples/gpt2_train.py "${small[@]}"
target/release/memprof run -f train_step examples/train.py --steps 3
target/release/memprof run --modules --depth 2 --suggest-checkpoints 2 examples/train.py --steps 3
