#!/usr/bin/env bash
# Untargeted Python-heavy code (benches/workloads.py case 4: calls of a small function in the
# script's own module) under python, memprof with no target, and memprof with a rarely called
# function targeted: the variants interleaved, ROUNDS times (default 5), each process printing the
# median of its repeats; this prints min, median and max over rounds, and the ratios of medians.
# Several binaries (before and after a change, say) run interleaved in the same rounds. On
# CPython 3.11 a control runs too: python with a frame-evaluation hook that only calls CPython's
# own evaluator (benches/eval_frame_hook.py, .c; needs cc and Python's headers), the price 3.11
# charges for any such hook, which is how memprof finds targeted frames there.
# Runs on the CPU (any machine); on the GPU machine benches/overhead.sh runs the same case.
#   benches/untargeted.sh [MEMPROF_BINARY...]   (default target/release/memprof; venv active)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- target/release/memprof
rounds=${ROUNDS:-5}
n=${N:-200000}
w=benches/workloads.py
pin=$(command -v taskset >/dev/null && echo "taskset -c 1" || true)
py=${PYTHON:-python3}
out=$(mktemp -d)
median() { "$py" -c "import json,sys,statistics;d=json.loads(sys.stdin.read().split('BENCH ')[1]);print(statistics.median(d['times'])*1e3)"; }
for r in $(seq "$rounds"); do
  $pin "$py" "$w" untargeted --n "$n" --repeats 7 | median >>"$out/python"
  if [ "$("$py" -c 'import sys; print(sys.version_info[:2] == (3, 11))')" = True ]; then
    $pin "$py" benches/eval_frame_hook.py "$w" untargeted --n "$n" --repeats 7 | median >>"$out/hooked"
  fi
  i=0
  for mp in "$@"; do
    i=$((i + 1))
    $pin "$mp" run -o "$out/r.yaml" "$w" untargeted --n "$n" --repeats 7 2>/dev/null | median >>"$out/none$i"
    $pin "$mp" run -f rare -o "$out/r.yaml" "$w" untargeted --n "$n" --repeats 7 2>/dev/null | median >>"$out/rare$i"
  done
done
"$py" - "$out" "$n" "$rounds" "$@" <<'PY'
import os, statistics, sys
out, n, rounds, binaries = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
read = lambda k: [float(x) for x in open(f"{out}/{k}")]
base = read("python")
print(f"untargeted: {n} calls of a small function per repeat; {rounds} interleaved rounds; ms (min / median / max of per-process medians), ratio of medians")
rows = [("python", "python3")]
if os.path.exists(f"{out}/hooked"):
    rows.append(("hooked", "python3 + a pass-through PEP 523 hook"))
for i, b in enumerate(binaries, 1):
    rows += [(f"none{i}", f"{b} run (no target)"), (f"rare{i}", f"{b} run -f rare")]
for k, label in rows:
    v = read(k)
    print(f"  {label:<48} {min(v):7.1f} {statistics.median(v):7.1f} {max(v):7.1f}   {statistics.median(v) / statistics.median(base):.3f}x")
PY
