#!/usr/bin/env bash
# Builds and checks memprof's wheel for each supported torch minor release (default: 2.9.1,
# 2.10.0 and 2.11.0): a build venv per release (target/venvs/torch-X, torch from PyPI), then
# scripts/wheel-check.sh against it (exact bytes through the installed command). With --suite,
# also the whole integration suite against that torch (tests/ run in the build's source copy).
#   scripts/torch-versions-check.sh [--suite] [VERSION...]
set -euo pipefail
cd "$(dirname "$0")/.."
suite=0
if [ "${1:-}" = --suite ]; then suite=1; shift; fi
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(2.9.1 2.10.0 2.11.0)
status=0
base=$(.venv/bin/python -c 'import sys; print(sys._base_executable)' 2>/dev/null || command -v python3)
for v in "${versions[@]}"; do
  echo "== torch $v" >&2
  if [ "$v" = "$(.venv/bin/python -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" ]; then
    venv=$PWD/.venv
    scripts/wheel-check.sh || status=1
  else
    venv=$PWD/target/venvs/torch-$v
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch, numpy" 2>/dev/null; then
      "$base" -m venv "$venv"
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "torch==$v" numpy
    fi
    scripts/wheel-check.sh --venv "$venv" || status=1
  fi
  if [ "$suite" = 1 ]; then
    # An older torch's suite runs in the source copy its wheel was built from (its own tch),
    # which holds the tests and fixtures of the same moment.
    source_dir=$PWD target_dir=$PWD/target
    if [ -d "target/torch-$v/source" ]; then
      source_dir=$PWD/target/torch-$v/source target_dir=$PWD/target/torch-$v
    fi
    # As build-wheel.sh: an older torch's tch checks the patch release too.
    bypass=()
    [ "${v%.*}" = 2.11 ] || bypass=(LIBTORCH_BYPASS_VERSION_CHECK=1)
    (cd "$source_dir" && env VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" LIBTORCH_USE_PYTORCH=1 \
      "${bypass[@]}" CARGO_TARGET_DIR="$target_dir" cargo test --no-fail-fast 2>&1 |
      grep -E "^test result|FAILED|panicked" >&2) || status=1
  fi
done
echo "torch-versions-check: $([ $status = 0 ] && echo PASSED || echo FAILED) (${versions[*]})"
exit $status
