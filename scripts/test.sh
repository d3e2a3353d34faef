#!/usr/bin/env bash
# Sets everything up, then runs every check: formatting, clippy, and all tests (unit tests, and
# integration tests that run the real binary on real Python and torch, on the CPU, and the HTML
# report in real headless Chromium, which it installs from Debian's packages), then the wheel:
# built, installed into a fresh venv with torch from PyPI, and run from there; installed beside
# another torch (which it must leave alone, naming the wheel that fits); and the wheel of the
# older stack, Python 3.11 with torch 2.11 (tch 0.24). The whole matrix, outside CI:
# scripts/torch-versions-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh debug
# The HTML report's tests open it in real headless Chromium: Debian's package.
if [ ! -x /usr/bin/chromium ]; then
  echo "test: installing Debian's chromium for the HTML report's tests" >&2
  sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y -q chromium >/dev/null ||
    { "${sudo[@]}" apt-get update -q >/dev/null && "${sudo[@]}" apt-get install -y -q chromium >/dev/null; }
fi
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" LIBTORCH_USE_PYTORCH=1
cargo fmt --all --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The layers' import graph: arrows only downward, no circle (docs/architecture.md).
python3 scripts/import_graph.py
# The README stays a five-minute read; the reference lives in docs/.
lines=$(wc -l < README.md)
[ "$lines" -le 300 ] || { echo "README.md has $lines lines; keep it to 300 (move reference to docs/)"; exit 1; }
cargo test --locked --workspace
scripts/wheel-check.sh --other-torch 2.11.0
scripts/torch-versions-check.sh 3.11:2.11.0
