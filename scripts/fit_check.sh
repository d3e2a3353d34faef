#!/usr/bin/env bash
# Issue 23's exactness check on the GPU machine, in one device call (after
# scripts/build-device.sh): each workload recorded with `memprof run --trace`, then replayed by
# `memprof fit` on a device as large as the GPU (no cap: the allocator never freed its cache),
# predicted against what the run's allocator itself read (the trace's `measured`):
#   run(command="scripts/fit_check.sh", carry=[".device"])
# On CUDA the trace's sizes are the allocator's block sizes (memprof's allocation reports), and
# every event is on stream 0: where a program uses other streams, or a block kept a remainder,
# the replay can differ; this check says by how much.
set -uo pipefail
cd "$(dirname "$0")/.."
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
out=${OUT:-/tmp}/fit && rm -rf "$out" && mkdir -p "$out"
status=0
check() {  # name, then the program and its arguments
  local name=$1; shift
  .device/memprof run --trace "$out/$name.json" -o "$out/$name.report.json" "$@" >/dev/null || { status=1; return; }
  .device/memprof fit "$out/$name.json" --memory 79GiB --format json -o "$out/$name.fit.json" || status=1
  python3 - "$out/$name.fit.json" "$name" <<'PY' || status=1
import json, sys
p = json.load(open(sys.argv[1]))
pred, meas = p["predicted"], p.get("measured") or {}
print("%-10s %8d events" % (sys.argv[2], p["events"]))
ok = True
for k in ("reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_alloc_retries", "segment.all.peak"):
    same = pred.get(k) == meas.get(k)
    ok &= same
    print("  %-26s predicted %14s measured %14s %s" % (k, pred.get(k), meas.get(k), "ok" if same else "DIFFERS"))
sys.exit(0 if ok else 1)
PY
}
check resnet50 examples/train.py --steps 3
check gpt2 examples/gpt2_train.py
echo "fit-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
