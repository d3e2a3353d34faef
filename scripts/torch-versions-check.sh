#!/usr/bin/env bash
# The support matrix, outside CI: the release build (scripts/release.sh: one wheel per Python,
# every torch of src/torch/releases.tsv), installed by name into a fresh venv per Python and
# torch (scripts/wheel-check.sh: exact bytes, the peak's sites, the API, pytest, a Jupyter
# kernel, torch left as it was); then, with --sdist, the sdist built by pip in a venv of
# SDIST_PY with torch SDIST_TORCH (default 3.12, 2.13.0), its peak checked the same way.
#   scripts/torch-versions-check.sh [--sdist] [PY ...]     default: 3.11 3.12 3.13
# (3.14: where an interpreter is found; none is on these machines: docs/install.md.)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stack.sh
sdist=0
if [ "${1:-}" = --sdist ]; then sdist=1; shift; fi
pythons=("$@")
[ ${#pythons[@]} -gt 0 ] || pythons=(3.11 3.12 3.13)
entries=()
for py in "${pythons[@]}"; do
  while IFS=$'\t' read -r minor _std _tch version _rest; do
    entries+=("$py:$version")
  done < <(grep -v '^#' src/torch/releases.tsv)
done
status=0
scripts/wheel-check.sh "${entries[@]}" || status=1
if [ "$sdist" = 1 ]; then
  py=${SDIST_PY:-3.12} t=${SDIST_TORCH:-2.13.0}
  venv=${TMPDIR:-/tmp}/memprof-sdist-check
  rm -rf "$venv" && make_venv "$(find_python "$py")" "$venv"
  "$venv/bin/python" -m pip install --quiet "torch==$t" numpy maturin==1.16.0
  before=$("$venv/bin/python" -m pip freeze --all | grep -iE '^(torch|nvidia|triton)' | sort)
  sdist_file=$(ls dist/torch_memprof-*.tar.gz | head -n 1)
  start=$(date +%s)
  # The route for a platform without a wheel: built here against this venv's torch.
  "$venv/bin/python" -m pip install --quiet --no-build-isolation "$sdist_file"
  echo "sdist: built and installed in $(($(date +%s) - start)) s" >&2
  after=$("$venv/bin/python" -m pip freeze --all | grep -iE '^(torch|nvidia|triton)' | sort | grep -vi '^torch-memprof')
  [ "$before" = "$after" ] || { echo "FAIL   the sdist's install changed torch" >&2; status=1; }
  python3 scripts/wheel_check.py "$venv" || status=1
  rm -rf "$venv"
fi
echo "torch-versions-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
