#!/usr/bin/env bash
# Sets everything up, then runs every check: formatting, clippy, and all tests (unit tests, and
# integration tests that run the real binary on real Python and torch, on the CPU, and the HTML
# report in real headless Chromium, which it installs from Debian's packages), then the
# package: the wheels and the index built as released, torch-memprof installed by name into
# fresh venvs with torch from PyPI (3.11 + 2.9, 3.12 + 2.12, 3.13 + 2.15) and run from there.
# The whole matrix and the sdist, outside CI: scripts/torch-versions-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# One full build: incremental compilation's caches would only cost disk (about 1 GB).
export CARGO_INCREMENTAL=0
echo "test: $(df -h --output=avail . | tail -1 | tr -d ' ') free on this disk at the start" >&2
scripts/setup.sh debug
# The HTML report's tests open it in real headless Chromium: Debian's package.
if [ ! -x /usr/bin/chromium ]; then
  echo "test: installing Debian's chromium for the HTML report's tests" >&2
  sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y -q chromium >/dev/null ||
    { "${sudo[@]}" apt-get update -q >/dev/null && "${sudo[@]}" apt-get install -y -q chromium >/dev/null; }
fi
# The live view's tests drive a real terminal: tmux (in this machine image; installed if not).
if ! command -v tmux >/dev/null; then
  echo "test: installing Debian's tmux for the live view's tests" >&2
  sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get install -y -q tmux >/dev/null ||
    { "${sudo[@]}" apt-get update -q >/dev/null && "${sudo[@]}" apt-get install -y -q tmux >/dev/null; }
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
# torch-memprof built as released (scripts/release.sh) and installed by name from that index into
# venvs of the oldest, a middle and the newest supported Python and torch (each about 5 GB).
echo "test: $(df -h --output=avail . | tail -1 | tr -d ' ') free on this disk before the wheel check" >&2
scripts/wheel-check.sh
