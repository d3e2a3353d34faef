#!/usr/bin/env bash
# Sets up everything memprof needs to build and run here, idempotently:
#   - .venv: a virtualenv of the newest stack, Python 3.13 with torch==2.15.0 from PyPI, and numpy
#     (without it every `import torch` warns "Failed to initialize NumPy");
#   - the memprof binary, built against that venv's libtorch (build/libtorch.rs: no tch release
#     binds torch 2.15, so memprof links it itself; docs/install.md).
# Usage: scripts/setup.sh [debug|release]   (default: release)
#   PYTHON=python3.X and MEMPROF_TORCH=2.X.Y choose another stack (.venv is remade for it).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stack.sh
profile=${1:-release}
torch=${MEMPROF_TORCH:-2.15.0}
minor=3.13
if [ -n "${PYTHON:-}" ]; then
  python=$PYTHON
else
  # Python 3.13: on PATH, else pyenv's; else the default python3, with a word.
  if ! python=$(find_python "$minor"); then
    python=python3
    echo "setup: no Python $minor found; using $(python3 --version) (set PYTHON to choose)" >&2
  fi
fi
want=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ -x .venv/bin/python ] &&
  [ "$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" != "$want" ]; then
  echo "setup: .venv has another Python than $want; making it anew" >&2
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$python" --version)" >&2
  "$python" -m venv .venv
fi
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch')" 2>/dev/null; then
  echo "setup: installing torch==$torch into .venv (about 5 GB with its CUDA libraries)" >&2
  pip_install_lean .venv/bin/python "torch==$torch"
fi
if ! .venv/bin/python -c 'import numpy' 2>/dev/null; then
  echo "setup: installing numpy into .venv" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check numpy
fi
# What the in-process front end is tested with: pytest (the plugin), and a real Jupyter kernel.
if ! .venv/bin/python -c 'import pytest, ipykernel, nbclient, nbformat' 2>/dev/null; then
  echo "setup: installing pytest, ipykernel, nbclient and nbformat into .venv" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    'pytest>=8' ipykernel nbclient nbformat
fi
# What the conformance suite's programs use (tests/conformance/check.py): Hydra, and a
# HuggingFace Trainer (transformers, with accelerate).
if ! .venv/bin/python -c 'import hydra, transformers, accelerate' 2>/dev/null; then
  echo "setup: installing hydra-core, transformers and accelerate into .venv" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    hydra-core transformers accelerate
fi
# `import memprof`, its pytest plugin and `%load_ext memprof` in .venv, from this checkout: the
# package's Python files in place (a .pth, as an editable install has), its entry points, and
# the native core that cargo builds (target/*/libmemprof.so, found by src/wheel/memprof/_core.py).
.venv/bin/python scripts/dev_install.py
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" LIBTORCH_USE_PYTORCH=1
# tch where the manifest's tch release binds this torch (2.11); other releases: build-wheel.sh.
features=()
[ "$(scripts/tch-for-torch.sh "$torch")" = "$(manifest_tch)" ] && features=(--features tch)
if [ "$profile" = release ]; then
  cargo build --release --locked "${features[@]}"
else
  cargo build --locked "${features[@]}"
fi
