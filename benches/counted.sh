#!/usr/bin/env bash
# Runs a counted bench script under callgrind (with its cache simulation) and prints its rows:
# instructions, data reads and writes and simulated first- and last-level cache misses of one
# mode over another, per unit of work. Counts, not times (two runs of one build agree within
# 1.5%), so two builds compare on a noisy machine: MEMPROF_NATIVE=<build>/libmemprof.so picks
# a build.
#   benches/counted.sh SCRIPT [ARGS...]
# The script (benches/module_call_instructions.py, benches/history_instructions.py) runs each
# mode's work between benches/counted.c's marks, each mode dumped under its name, and prints
# "ROW <label> <mode> <base mode> <units>" for each row: (mode - base mode) / units.
# Needs valgrind (Debian's package also gives <valgrind/callgrind.h>, which counted.c includes)
# and cc. KEEP=DIR keeps callgrind's dumps, one per mode (DIR/cg.N; with FUNCTIONS set,
# `python3 benches/counted_functions.py DIR/cg.MODE DIR/cg.BASE UNITS` reads them;
# callgrind_annotate put every count of such a part under __libc_start_main here). CACHE passes
# callgrind's cache geometry, e.g. CACHE="--LL=262144,8,64": a last
# level of 256 KiB, which the step's own work fills between memprof's calls, as cuDNN and the
# driver fill a GPU host's caches between them (this machine's last level, the default, keeps
# every line a small step touches): DLmr then counts the lines memprof fetched from memory.
# FUNCTIONS=N prints, under each row, the N functions whose own counts moved most (ordered by
# ORDER, default DLmr; benches/counted_functions.py), the dumps then written with their names in
# full (--compress-strings=no: a compressed dump names a function only in the part that met it
# first, and a later part's file has its number alone).
set -euo pipefail
cd "$(dirname "$0")/.."
script=$1
shift
python=${PYTHON:-python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=(); [ -z "${FUNCTIONS:-}" ] || names=(--compress-strings=no)
PYTHONHASHSEED=0 valgrind --tool=callgrind --cache-sim=yes ${CACHE:-} "${names[@]}" --collect-atstart=no --callgrind-out-file="$out/cg" \
  "$python" "$script" "$@" \
  >"$out/stdout" 2>"$out/stderr" || { tail -20 "$out/stderr"; exit 1; }
[ -z "${KEEP:-}" ] || cp -r "$out" "$KEEP"
# Each mode's dump (cg.N): its label in "desc: Trigger: Client Request: LABEL", its counts on
# the "summary:" line, in the order of "events:".
"$python" - "$out/stdout" "$out"/cg.* <<'PY'
import os
import sys
sys.path.insert(0, "benches")
import counted_functions
rows, dumps = {}, {}
for path in sys.argv[2:]:
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
        dumps[label] = path
want = ["Ir", "Dr", "Dw", "D1mr", "D1mw", "DLmr", "DLmw"]
printed = False
for line in open(sys.argv[1]):
    if line.startswith("NOTE "):
        print(line[5:].rstrip())
    if not line.startswith("ROW "):
        continue
    parts = line.split()
    label, (a, b, per) = " ".join(parts[1:-3]), parts[-3:]
    per = float(per)
    if not printed:
        print("%-40s" % "" + "".join("%10s" % e for e in want))
        printed = True
    print("%-40s" % label + "".join("%10.1f" % ((rows[a].get(e, 0) - rows[b].get(e, 0)) / per)
                                     for e in want))
    if os.environ.get("FUNCTIONS"):
        counted_functions.table(dumps[a], dumps[b], per, os.environ.get("ORDER", "DLmr"),
                                int(os.environ["FUNCTIONS"]))
PY
