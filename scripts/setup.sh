#!/usr/bin/env bash
# Sets up everything memprof needs to build and run here, idempotently:
#   - .venv: a virtualenv with torch==2.11.0 from PyPI (the version tch 0.24 binds to) and numpy
#     (without it every `import torch` warns "Failed to initialize NumPy");
#   - the memprof binary, built against that venv's libtorch (LIBTORCH_USE_PYTORCH=1).
# Usage: scripts/setup.sh [debug|release]   (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-release}
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$python" --version)" >&2
  "$python" -m venv .venv
fi
if ! .venv/bin/python -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.11.0")' 2>/dev/null; then
  echo "setup: installing torch==2.11.0 into .venv (about 5 GB with its CUDA libraries)" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check torch==2.11.0
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
# `import memprof`, its pytest plugin and `%load_ext memprof` in .venv, from this checkout: the
# package's Python files in place (a .pth, as an editable install has), its entry points, and
# the native core that cargo builds (target/*/libmemprof.so, found by src/wheel/memprof/_core.py).
.venv/bin/python scripts/dev_install.py
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" LIBTORCH_USE_PYTORCH=1
if [ "$profile" = release ]; then
  cargo build --release --locked
else
  cargo build --locked
fi
