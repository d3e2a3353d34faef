#!/usr/bin/env bash
# benches/module_call_instructions.py under callgrind (with its cache simulation): instructions,
# data reads and simulated first-level and last-level cache misses per module call that
# `--modules` adds over no flags, and per step that no flags adds over unprofiled. Counts, not
# times (two runs of one build agree within 1.5%), so two builds compare on a noisy machine: MEMPROF_NATIVE=<build>/libmemprof.so picks a build.
#   benches/module_call_instructions.sh [STEPS]      (default 10; about 4 minutes here)
# Needs valgrind (Debian's package also gives <valgrind/callgrind.h>, which benches/counted.c
# includes) and cc.
#   KEEP=DIR keeps callgrind's dumps, one per mode (callgrind_annotate --inclusive=yes DIR/cg.N).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
python=${PYTHON:-python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
PYTHONHASHSEED=0 valgrind --tool=callgrind --cache-sim=yes --collect-atstart=no --callgrind-out-file="$out/cg" \
  "$python" benches/module_call_instructions.py "$steps" \
  >"$out/stdout" 2>"$out/stderr" || { tail -20 "$out/stderr"; exit 1; }
[ -z "${KEEP:-}" ] || cp -r "$out" "$KEEP"
calls=$(awk '/^CALLS/ {print $2}' "$out/stdout")
# Each mode's dump (cg.N): its label in "desc: Trigger: Client Request: LABEL", its counts on
# the "summary:" line, in the order of "events:".
"$python" - "$calls" "$steps" "$out"/cg.* <<'PY'
import sys
calls, steps = int(sys.argv[1]), int(sys.argv[2])
rows = {}
for path in sys.argv[3:]:
    label, events, summary = None, None, None
    for line in open(path):
        if line.startswith("desc: Trigger: Client Request:"):
            label = line.split(":", 3)[3].strip()
        elif line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(n) for n in line.split()[1:]]
    if label and events and summary:
        rows[label] = dict(zip(events, summary))
want = ["Ir", "Dr", "Dw", "D1mr", "D1mw", "DLmr", "DLmw"]
print("%d steps per mode, %d module calls a step" % (steps, calls))
print("%-34s" % "" + "".join("%10s" % e for e in want))
def row(label, a, b, per):
    print("%-34s" % label + "".join("%10.1f" % ((rows[a].get(e, 0) - rows[b].get(e, 0)) / per)
                                     for e in want))
row("no flags over unprofiled, a step", "no_flags", "unprofiled", steps)
row("--modules over no flags, a call", "modules", "no_flags", steps * calls)
PY
