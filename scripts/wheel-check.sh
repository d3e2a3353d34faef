#!/usr/bin/env bash
# Builds memprof's wheel, installs it into a fresh venv that gets torch from PyPI (and one without
# torch), and checks the installed `memprof` command there with no Rust, no LD_LIBRARY_PATH and no
# VIRTUAL_ENV (scripts/wheel_check.py: exact bytes, the peak's sites, the script's environment,
# the missing-torch message), then the conformance suite through it (tests/conformance/check.py:
# every program of fixtures/conformance as under python). scripts/test.sh runs it for the
# project's torch; for another torch:
#   scripts/wheel-check.sh --venv DIR     # DIR: a venv with that torch, to build against
#   scripts/wheel-check.sh --other-torch 2.11.0
#       also installs the wheel into a venv of the same Python with that torch: pip must leave
#       torch as it was, and `memprof run` and `import memprof` must name the wheel that fits.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stack.sh
build_args=(--debug)
build_venv=$PWD/.venv
other=""
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) build_venv=$(cd "$2" && pwd); build_args+=(--venv "$build_venv"); shift 2 ;;
    --other-torch) other=$2; shift 2 ;;
    *) echo "wheel-check: unknown argument '$1' (--venv DIR, --other-torch VERSION)" >&2; exit 2 ;;
  esac
done
wheel=$(scripts/build-wheel.sh "${build_args[@]}" | tail -n 1)
echo "wheel-check: $wheel" >&2
read -r torch base python_version < <("$build_venv/bin/python" -c '
import sys, torch
print(torch.__version__.split("+")[0], sys._base_executable, "%d.%d" % sys.version_info[:2])')
check=${TMPDIR:-/tmp}/memprof-wheel-check-py$python_version-torch$torch
rm -rf "$check" && mkdir -p "$check"
# Its venvs hold a torch each (about 5 GB with the CUDA libraries): gone when the check ends,
# unless MEMPROF_KEEP_CHECK=1 keeps them to look at.
[ "${MEMPROF_KEEP_CHECK:-}" = 1 ] || trap 'rm -rf "$check"' EXIT
pip=(--quiet --disable-pip-version-check)
make_venv "$base" "$check/venv"
make_venv "$base" "$check/no-torch"
# torch from PyPI (pip's cache has it when the project's set-up has installed the same version).
"$check/venv/bin/python" -m pip install "${pip[@]}" "torch==$torch" numpy
# What the in-process front end is checked with: pytest (the plugin) and a Jupyter kernel.
"$check/venv/bin/python" -m pip install "${pip[@]}" 'pytest>=8' ipykernel nbclient nbformat
# What the conformance suite's programs use (Hydra, a HuggingFace Trainer).
"$check/venv/bin/python" -m pip install "${pip[@]}" hydra-core transformers accelerate
"$check/venv/bin/python" -m pip install "${pip[@]}" "$wheel"
"$check/no-torch/bin/python" -m pip install "${pip[@]}" "$wheel"
if [ -n "$other" ]; then
  make_venv "$base" "$check/other-torch"
  "$check/other-torch/bin/python" -m pip install "${pip[@]}" "torch==$other" numpy
  # A plain install, as a user would type it: it must not change that torch.
  "$check/other-torch/bin/python" -m pip install "${pip[@]}" "$wheel"
fi
python3 scripts/wheel_check.py "$check/venv" "$check/no-torch" ${other:+"$check/other-torch" "$other"}
# The wheel's `memprof run` (the venv's own python) through the differential conformance suite.
python3 tests/conformance/check.py --require-all --python "$check/venv/bin/python" \
  --memprof "$check/venv/bin/memprof"
