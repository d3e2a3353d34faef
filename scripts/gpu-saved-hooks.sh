#!/usr/bin/env bash
# How `--modules` counts the bytes saved for backward, on the GPU machine, through the wheel
# (.device/wheel, from scripts/build-device.sh or `scripts/release.sh --python 3.12 --torch
# 2.11`), in one device call:
#   1. a program's tensor objects after forward passes on cuda:0, and the saved-tensors hooks its
#      forward sees, the same as under python;
#   2. every module row (calls, peak, saved bytes) of the resnet50 and GPT-2 steps the same with
#      memprof's stand-in for SavedVariable's constructor (the default, no hook) as with the
#      saved-tensors hooks in C++ (MEMPROF_SAVED_HOOKS=hooks) and in Python (=python);
#   3. what --modules costs with each, by the in-process method (benches/paired_cost.sh;
#      COST=0 leaves it out; VARIANTS, GPUS, PROCS, ROUNDS as it takes them).
# BEFORE=DIR (a folder holding another build's wheel) also compares every row with that build's.
#   run(command="scripts/gpu-saved-hooks.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/device_wheel.sh
python=$device_venv/bin/python memprof=$device_venv/bin/memprof
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
unset LD_LIBRARY_PATH VIRTUAL_ENV
out=${OUT:-/tmp}/saved-hooks && mkdir -p "$out"
status=0
echo "== 1. tensor objects after forward passes, hooks seen (fixtures/saved_objects.py cuda)"
plain=$(cd fixtures && "$python" saved_objects.py cuda)
profiled=$(cd fixtures && "$memprof" run --modules -o "$out/objects.json" saved_objects.py cuda)
echo "$profiled"
if [ -n "$plain" ] && [ "$plain" = "$profiled" ]; then echo "same as python: yes"; else
  echo "same as python: NO; python printed:"; echo "$plain"; status=1; fi
echo "== 2. module rows: no hook, hooks in C++, in Python${BEFORE:+, and the build in $BEFORE}"
both() { # label, then the command that is memprof: the resnet50 and GPT-2 reports
  local label=$1; shift
  "$@" run --modules -o "$out/resnet-$label.json" benches/workloads.py resnet --repeats 3 \
    >/dev/null 2>&1 || { echo "resnet $label failed"; status=1; }
  "$@" run --modules -o "$out/gpt2-$label.json" examples/gpt2_train.py --steps 3 \
    >/dev/null 2>&1 || { echo "gpt2 $label failed"; status=1; }
}
both stand-in env -u MEMPROF_SAVED_HOOKS "$memprof"
both hooks env MEMPROF_SAVED_HOOKS=hooks "$memprof"
both python env MEMPROF_SAVED_HOOKS=python "$memprof"
pairs="hooks=stand-in python=stand-in"
if [ -n "${BEFORE:-}" ]; then
  install_wheel --target /tmp/memprof-before-lib "$(ls "$BEFORE"/*.whl | head -1)" || status=1
  both before env PYTHONPATH=/tmp/memprof-before-lib "$python" -m memprof
  pairs="$pairs before=stand-in"
fi
"$python" - "$out" $pairs <<'PY' || status=1
import json, os, sys
out, failed = sys.argv[1], False
for pair in sys.argv[2:]:
    was, now = pair.split("=")
    for case in ("resnet", "gpt2"):
        rows = lambda v: [(e["root"], e["module"], e["phase"], e["calls"], e["peak_bytes"],
                           e.get("saved_bytes")) for e in json.load(
                               open(os.path.join(out, f"{case}-{v}.json")))["modules"]["modules"]]
        a, b = rows(was), rows(now)
        same = sum(x == y for x, y in zip(a, b))
        saved = sum(r[5] or 0 for r in b if r[2] == "forward")
        print(f"{case}: {len(b)} module rows; {same} the same as {was}'s (calls, peak, saved "
              f"bytes); forward rows' saved bytes sum to {saved}"
              + ("" if same == len(a) == len(b) else "; differences: "
                 + "; ".join(f"{x} -> {y}" for x, y in zip(a, b) if x != y)[:800]))
        failed |= not (same == len(a) == len(b))
sys.exit(failed)
PY
[ "${COST:-1}" = 0 ] && exit $status
echo "== 3. the cost, in-process (benches/paired_cost.sh)"
VARIANTS=${VARIANTS:-none,modules,modules_hooks} GPUS=${GPUS:-0} PROCS=${PROCS:-3} \
  PYTHON=$python benches/paired_cost.sh 2>&1 | grep -v '^BENCH' || status=1
exit $status
