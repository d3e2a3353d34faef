#!/usr/bin/env bash
# torch-memprof as a user gets it: scripts/release.sh builds the wheels and the index
# (dist/simple), then each check venv installs it BY NAME from that index, beside a torch from
# PyPI, with no Rust, no LD_LIBRARY_PATH and no VIRTUAL_ENV, and runs it
# (scripts/wheel_check.py: exact bytes by line, the peak's sites, the script's environment,
# `import memprof`, the pytest plugin, a Jupyter kernel, the missing-torch message), then five
# conformance cases (warnings among them). pip must leave torch as it was. The newest venv runs
# the whole conformance suite through the installed
# `memprof run` (tests/conformance/check.py), and the other PyPI `memprof` installed beside it
# must be named with its fix. scripts/test.sh (CI) runs the default three.
#   scripts/wheel-check.sh [--no-build] [PY:TORCH ...]
#     default: 3.11:2.9.1 (the oldest) 3.12:2.12.1 (one between) 3.13:2.15.0 (the newest)
#     --no-build: the dist/ there is (scripts/release.sh run before, with these Pythons and torches)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stack.sh
build=1
if [ "${1:-}" = --no-build ]; then build=0; shift; fi
entries=("$@")
[ ${#entries[@]} -gt 0 ] || entries=(3.11:2.9.1 3.12:2.12.1 3.13:2.15.0)
pythons="" torches=""
for e in "${entries[@]}"; do
  py=${e%%:*} t=${e##*:}
  pythons+="${pythons:+,}$py" torches+="${torches:+,}${t%.*}"
done
if [ "$build" = 1 ]; then
  scripts/release.sh --debug --python "$pythons" --torch "$torches"
fi
index="file://$PWD/dist/simple"
check=$(mktemp -d "${TMPDIR:-/tmp}/memprof-wheel-check.XXXXXX")
# Each venv holds a torch (about 5 GB with its CUDA libraries): gone when the check ends,
# unless MEMPROF_KEEP_CHECK=1 keeps them to look at.
[ "${MEMPROF_KEEP_CHECK:-}" = 1 ] || trap 'rm -rf "$check"' EXIT
pip=(--quiet --disable-pip-version-check)
status=0 results=()
newest=${entries[-1]}
for e in "${entries[@]}"; do
  py=${e%%:*} t=${e##*:}
  python=$(find_python "$py") || { echo "wheel-check: no Python $py" >&2; exit 2; }
  venv=$check/py$py-torch$t
  echo "== Python $py, torch $t: pip install torch-memprof from $index" >&2
  make_venv "$python" "$venv"
  pip_install_lean "$venv/bin/python" "torch==$t" numpy 'pytest>=8' ipykernel nbclient nbformat
  before=$("$venv/bin/python" -m pip freeze --all | grep -iE '^(torch|nvidia|triton)' | sort)
  # By name, as a user types it, from the built index only.
  "$venv/bin/python" -m pip install "${pip[@]}" --index-url "$index" torch-memprof
  after=$("$venv/bin/python" -m pip freeze --all | grep -iE '^(torch|nvidia|triton)' | sort)
  installed=$(echo "$after" | grep -i '^torch-memprof' || true)
  if [ "$before" != "$(echo "$after" | grep -vi '^torch-memprof')" ] || [ -z "$installed" ]; then
    echo "FAIL   installing torch-memprof changed torch or did not install: $installed" >&2
    diff <(echo "$before") <(echo "$after") >&2 || true
    status=1
  else
    echo "ok     pip install torch-memprof ($installed) left torch $t and its libraries as they were" >&2
  fi
  no_torch=()
  if [ "$e" = "${entries[0]}" ]; then
    make_venv "$python" "$check/no-torch"
    "$check/no-torch/bin/python" -m pip install "${pip[@]}" --index-url "$index" torch-memprof
    no_torch=("$check/no-torch")
  fi
  if python3 scripts/wheel_check.py "$venv" "${no_torch[@]}"; then verdict=PASSED; else verdict=FAILED; status=1; fi
  if [ "$e" != "$newest" ]; then
    # A script as python runs it, in every venv (the newest runs the whole suite below):
    # `__main__`, warnings (Python's and torch's C++), the script's classes, pickling, a fork Pool.
    python3 tests/conformance/check.py --python "$venv/bin/python" --memprof "$venv/bin/memprof" \
      --only main_module --only warnings --only classes_and_device_contexts \
      --only pickling_and_torch_save --only pools_fork || { verdict="$verdict, conformance FAILED"; status=1; }
  fi
  if [ "$e" = "$newest" ]; then
    # What the conformance suite's programs use (Hydra, a HuggingFace Trainer).
    "$venv/bin/python" -m pip install "${pip[@]}" hydra-core transformers accelerate
    python3 tests/conformance/check.py --require-all --python "$venv/bin/python" \
      --memprof "$venv/bin/memprof" || { verdict="$verdict, conformance FAILED"; status=1; }
    # PyPI's other `memprof` (an unrelated profiler with the same import name), installed
    # beside: one message with the fix, then the fix works.
    "$venv/bin/python" -m pip install "${pip[@]}" cython setuptools
    "$venv/bin/python" -m pip install "${pip[@]}" --no-build-isolation memprof==0.3.6
    out=$(cd fixtures && env -i PATH=/usr/bin:/bin "$venv/bin/memprof" run lines.py 2>&1) && rc=0 || rc=$?
    if [ "$rc" = 2 ] && [[ "$out" == *"another package named memprof"* ]] &&
       [[ "$out" == *"pip uninstall -y memprof torch-memprof && pip install torch-memprof"* ]]; then
      echo "ok     PyPI's other memprof beside torch-memprof: one message with the fix (exit 2)" >&2
    else
      echo "FAIL   PyPI's other memprof beside torch-memprof: exit $rc: $out" >&2; status=1
    fi
    "$venv/bin/python" -m pip uninstall "${pip[@]}" -y memprof torch-memprof
    "$venv/bin/python" -m pip install "${pip[@]}" --index-url "$index" torch-memprof
    out=$(cd fixtures && env -i PATH=/usr/bin:/bin "$venv/bin/memprof" run lines.py 2>&1) && rc=0 || rc=$?
    if [ "$rc" = 0 ] && [[ "$out" == *"= the peak"* ]]; then
      echo "ok     after the fix, memprof runs" >&2
    else
      echo "FAIL   after the fix: exit $rc: ${out: -500}" >&2; status=1
    fi
  fi
  results+=("Python $py  torch $t  $installed  $verdict")
  rm -rf "$venv"
done
printf 'wheel-check: %s\n' "${results[@]}"
echo "wheel-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
