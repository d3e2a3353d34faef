#!/usr/bin/env bash
# What `memprof run --trace` costs (issue 23): an allocation-heavy step under memprof with no
# flags (the peak tracker alone) and with --trace (every allocation and free kept, then written
# as JSON), interleaved ROUNDS rounds (default 5), each process the median of its repeats; and
# the trace's size. CPU here (benches/alloc_heavy.py); on the GPU machine DEVICE=cuda.
#   benches/trace_cost.sh [MEMPROF_BINARY]   (default target/release/memprof; venv active)
set -euo pipefail
cd "$(dirname "$0")/.."
mp=${1:-target/release/memprof}
rounds=${ROUNDS:-5}
out=${OUT:-$(mktemp -d)}/trace_cost
rm -rf "$out" && mkdir -p "$out"
py=${PYTHON:-python3}
args=(benches/alloc_heavy.py --device "${DEVICE:-cpu}" --steps 30 --tensors 2000)
for r in $(seq "$rounds"); do
  "$py" "${args[@]}" | grep '^BENCH' >>"$out/step-python.txt"
  "$mp" run -o "$out/r.json" "${args[@]}" 2>/dev/null | grep '^BENCH' >>"$out/step-peak.txt"
  "$mp" run --trace "$out/t.json" -o "$out/r.json" "${args[@]}" 2>/dev/null | grep '^BENCH' >>"$out/step-trace.txt"
done
"$py" benches/rounds_table.py "$out" "step=2000 tensors allocated and freed per step (median of 30 steps)" \
  "python=python;peak=memprof run (no flags);trace=memprof run --trace"
"$py" - "$out/t.json" <<'PY'
import json, os, sys
t = json.load(open(sys.argv[1]))
print("trace: %d events, %.1f MB (%.0f bytes per event)" % (
    len(t["events"]), os.path.getsize(sys.argv[1]) / 1e6, os.path.getsize(sys.argv[1]) / len(t["events"])))
PY
