#!/usr/bin/env bash
# Compile-and-link times of the test targets, two checkouts side by side, interleaved rounds:
#   benches/build_times.sh BEFORE_CHECKOUT BEFORE_TARGET_DIR [ROUNDS]
# (this checkout is "after", with its own target/). Each round, in each checkout, times
# `cargo test --no-run` after: `cargo clean -p memprof` (every memprof target compiled and linked
# from scratch, the dependencies kept); touching src/main.rs (rustc's incremental no-op and the
# links); touching tests/common/mod.rs (the integration tests alone). Prints min / median / max
# over rounds, in seconds. Build both once first.
set -euo pipefail
after=$(cd "$(dirname "$0")/.." && pwd)
before=$1 before_target=$2 rounds=${3:-5}
export VIRTUAL_ENV=$after/.venv PATH=$after/.venv/bin:$PATH LIBTORCH_USE_PYTORCH=1
one() { # checkout, target dir, file to touch (or "clean"): prints seconds
  if [ "$3" = clean ]; then
    (cd "$1" && CARGO_TARGET_DIR=$2 cargo clean -p memprof >/dev/null 2>&1)
  else
    touch "$1/$3"
  fi
  local s=$(date +%s.%N)
  (cd "$1" && CARGO_TARGET_DIR=$2 cargo test --locked --no-run >/dev/null 2>&1)
  echo "$(date +%s.%N) - $s" | bc
}
declare -A t
for r in $(seq "$rounds"); do
  for side in before after; do
    if [ $side = before ]; then dir=$before tgt=$before_target; else dir=$after tgt=$after/target; fi
    t[$side-clean]+="$(one "$dir" "$tgt" clean) "
    t[$side-src]+="$(one "$dir" "$tgt" src/main.rs) "
    t[$side-tests]+="$(one "$dir" "$tgt" tests/common/mod.rs) "
  done
done
for k in before-clean after-clean before-src after-src before-tests after-tests; do
  python3 -c 'import sys, statistics as s; v = sorted(map(float, sys.argv[2:])); print(f"{sys.argv[1]:<13} {v[0]:6.2f} / {s.median(v):6.2f} / {v[-1]:6.2f} s  ({len(v)} rounds)")' "$k" ${t[$k]}
done
