#!/usr/bin/env bash
# --modules' cost per module call on the CPU (benches/module_calls.py): python3 and each memprof
# binary given (before and after a change, say) with --modules, interleaved, ROUNDS rounds
# (default 5), pinned to one core. Only allocated-bytes columns (the CPU's default adds host RSS,
# a /proc read per sample), as on CUDA.
#   benches/module_calls.sh [MEMPROF_BINARY...]   (default target/release/memprof; venv active)
# DEVICE=cuda runs the model on the GPU (the hooks then also run on autograd's device thread).
# PIN= (empty) runs unpinned (autograd's device thread wants a core of its own).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- target/release/memprof
rounds=${ROUNDS:-5}
pin=${PIN-$(command -v taskset >/dev/null && echo "taskset -c 1" || true)}
py=${PYTHON:-python3}
out=$(mktemp -d)
ms() { sed -n 's/^BENCH median \([0-9.]*\) ms.*/\1/p'; }
for r in $(seq "$rounds"); do
  $pin "$py" benches/module_calls.py "${DEVICE:-cpu}" | ms >>"$out/python"
  i=0
  for mp in "$@"; do
    i=$((i + 1))
    $pin "$mp" run --modules --stat allocated_bytes.all.peak --stat allocated_bytes.all.current \
      -o "$out/r.json" benches/module_calls.py "${DEVICE:-cpu}" 2>/dev/null | ms >>"$out/m$i"
  done
done
"$py" - "$out" "$rounds" "$@" <<'PY'
import statistics, sys
out, rounds, binaries = sys.argv[1], sys.argv[2], sys.argv[3:]
read = lambda k: [float(x) for x in open(f"{out}/{k}")]
base = statistics.median(read("python"))
print(f"module_calls: 181 module calls per step; {rounds} interleaved rounds; ms per step (min / median / max), ratio, added per module call (forward and backward)")
print(f"  {'python3':<44} {min(read('python')):7.2f} {base:7.2f} {max(read('python')):7.2f}")
for i, b in enumerate(binaries, 1):
    v = read(f"m{i}")
    m = statistics.median(v)
    print(f"  {b + ' run --modules':<44} {min(v):7.2f} {m:7.2f} {max(v):7.2f}   {m / base:.2f}x   +{(m - base) / 181 * 1e3:.1f} us")
PY
