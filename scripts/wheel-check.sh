#!/usr/bin/env bash
# Builds memprof's wheel, installs it into a fresh venv that gets torch from PyPI (and one without
# torch), and checks the installed `memprof` command there with no Rust, no LD_LIBRARY_PATH and no
# VIRTUAL_ENV (scripts/wheel_check.py: exact bytes, the script's environment, the missing-torch
# message). scripts/test.sh runs it for the project's torch; for another torch:
#   scripts/wheel-check.sh --venv DIR     # DIR: a venv with that torch, to build against
set -euo pipefail
cd "$(dirname "$0")/.."
build_args=(--debug)
build_venv=$PWD/.venv
if [ "${1:-}" = --venv ]; then build_venv=$(cd "$2" && pwd); build_args+=(--venv "$build_venv"); fi
wheel=$(scripts/build-wheel.sh "${build_args[@]}" | tail -n 1)
echo "wheel-check: $wheel" >&2
torch=$("$build_venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')
base=$("$build_venv/bin/python" -c 'import sys; print(sys._base_executable)')
check=${TMPDIR:-/tmp}/memprof-wheel-check-$torch
rm -rf "$check" && mkdir -p "$check"
"$base" -m venv "$check/venv"
"$base" -m venv "$check/no-torch"
pip=(--quiet --disable-pip-version-check)
# torch from PyPI (pip's cache has it when the project's set-up has installed the same version).
"$check/venv/bin/python" -m pip install "${pip[@]}" "torch==$torch" numpy
# What the in-process front end is checked with: pytest (the plugin) and a Jupyter kernel.
"$check/venv/bin/python" -m pip install "${pip[@]}" 'pytest>=8' ipykernel nbclient nbformat
"$check/venv/bin/python" -m pip install "${pip[@]}" "$wheel"
"$check/no-torch/bin/python" -m pip install "${pip[@]}" --no-deps "$wheel"
python3 scripts/wheel_check.py "$check/venv" "$check/no-torch"
