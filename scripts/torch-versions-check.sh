#!/usr/bin/env bash
# The support matrix outside CI: for each Python and torch, a build venv (target/venvs/, torch
# from PyPI), then scripts/wheel-check.sh against it (the wheel built with the documented
# command, installed, run: exact bytes, the peak's sites, the API, pytest, a Jupyter kernel).
# Prints a table with each build's time. With --suite, also the whole integration suite against
# that stack (tests/ run in the build's source copy).
#   scripts/torch-versions-check.sh [--suite] [PY:TORCH ...]
#     PY: a minor version (3.11: python3.11 on PATH, else pyenv's) or a python's path
#   default: 3.11 and 3.13, each with torch 2.9.1, 2.11.0, 2.13.0 and 2.15.0
#   --clean (after --suite, if any): each entry's build venv and target dir are removed after it
#   (about 8 GB each), for a machine whose disk does not hold the whole matrix at once
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stack.sh
suite=0 clean=0
if [ "${1:-}" = --suite ]; then suite=1; shift; fi
if [ "${1:-}" = --clean ]; then clean=1; shift; fi
entries=("$@")
if [ ${#entries[@]} -eq 0 ]; then
  for py in 3.11 3.13; do for t in 2.9.1 2.11.0 2.13.0 2.15.0; do entries+=("$py:$t"); done; done
fi
status=0
results=()
for entry in "${entries[@]}"; do
  py=${entry%%:*} t=${entry##*:}
  if ! python=$(find_python "$py"); then
    echo "torch-versions-check: no Python $py (python$py on PATH or in pyenv)" >&2
    status=1 results+=("$entry: no Python")
    continue
  fi
  minor=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  echo "== Python $minor, torch $t" >&2
  venv=$PWD/target/venvs/py$minor-torch$t
  if ! "$venv/bin/python" -c "import torch, numpy, sys; sys.exit(torch.__version__.split('+')[0] != '$t')" 2>/dev/null; then
    rm -rf "$venv"
    make_venv "$python" "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "torch==$t" numpy
  fi
  start=$(date +%s)
  log=target/venvs/py$minor-torch$t.log
  if scripts/wheel-check.sh --venv "$venv" >"$log" 2>&1; then verdict=PASSED; else verdict=FAILED; status=1; fi
  took=$(($(date +%s) - start))
  tch=$(scripts/tch-for-torch.sh "$t")
  link="no tch"
  [ -n "$tch" ] && link="tch $tch"
  results+=("Python $minor  torch $t  $link  wheel-check $verdict  (build and check ${took}s; $log)")
  echo "${results[-1]}" >&2
  if [ "$suite" = 1 ]; then
    target_dir=$PWD/target/wheel-py$minor-torch$t source_dir=$PWD
    [ -d "$target_dir/source" ] && source_dir=$target_dir/source
    features=()
    [ -n "$tch" ] && features=(--features tch)
    (cd "$source_dir" && env VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" LIBTORCH_USE_PYTORCH=1 \
      LIBTORCH_BYPASS_VERSION_CHECK=1 CARGO_TARGET_DIR="$target_dir" cargo test --no-fail-fast "${features[@]}" 2>&1 |
      grep -E "^test result|FAILED|panicked" >&2) || status=1
  fi
  if [ "$clean" = 1 ]; then rm -rf "$venv" "$PWD/target/wheel-py$minor-torch$t"; fi
done
printf '%s\n' "${results[@]}"
echo "torch-versions-check: $([ $status = 0 ] && echo PASSED || echo FAILED) (${entries[*]})"
exit $status
