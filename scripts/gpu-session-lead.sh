#!/usr/bin/env bash
# What a session's first steps cost beside its steady state, on the GPU machine in one device
# call: benches/paired_cost.sh run with each lead of LEADS in turn (default "0 24": N uncounted
# steps at each block's start, inside its session; 0 is issue 53's method as before), REPEATS
# times (default 2) so that the leads alternate in time, with BUILD's core (a dir as
# benches/paired_builds.sh takes it; default .device/wheel's); then one table per lead over its
# repeats. CASES (default resnet), VARIANTS (default none,modules), PROCS, ROUNDS as
# paired_cost.sh takes them.
#   run(command="BUILD=.device/pb-l scripts/gpu-session-lead.sh",
#       carry=[".device/wheel", ".device/pb-l"])
set -uo pipefail
cd "$(dirname "$0")/.."
out=/tmp/memprof-session-lead
rm -rf "$out" && mkdir -p "$out"
. benches/device_wheel.sh
lib=()
if [ -n "${BUILD:-}" ]; then
  install_build "$BUILD" "$out/lib" || exit 1
  lib=(PYTHONPATH="$out/lib")
fi
leads=${LEADS:-0 24}
for r in $(seq "${REPEATS:-2}"); do
  for lead in $leads; do
    echo "repeat $r: lead $lead"
    env "${lib[@]}" LEAD="$lead" CASES="${CASES:-resnet}" VARIANTS="${VARIANTS:-none,modules}" \
      PROCS="${PROCS:-2}" ROUNDS="${ROUNDS:-12}" PYTHON="$device_venv/bin/python" \
      benches/paired_cost.sh >"$out/lead$lead-run$r.txt" 2>&1
    cat /tmp/memprof-paired-cost/bench.txt >>"$out/lead$lead.txt"
  done
done
head -3 /tmp/memprof-paired-cost/machine.txt
for lead in $leads; do
  echo "## lead $lead"
  "$device_venv/bin/python" benches/paired_table.py "$out/lead$lead.txt"
done | tee "$out/tables.md"
[ -z "${OUT:-}" ] || cp "$out/tables.md" "$out"/lead*.txt "$OUT/"
