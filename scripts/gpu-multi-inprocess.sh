#!/usr/bin/env bash
# Issue 37 on two GPUs, the parts beside `memprof run`'s peak (after scripts/build-device.sh;
# scripts/gpu-multi-check.sh runs it last, or alone:
#   run(command="scripts/gpu-multi-inprocess.sh", carry=[".device"], kind="nvidia-h100-x2")):
# 1. memprof.profile() with no device on each rank measures that rank's GPU: its peak is the
#    rank's max_memory_allocated(); 2. `--trace` with no flags records rank 1's own device.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
venv=/opt/torch/.venv
export VIRTUAL_ENV=$venv PATH=$venv/bin:$PATH
export LD_LIBRARY_PATH=$venv/lib/python3.12/site-packages/torch/lib
out=${OUT:-/tmp}/multi-inprocess
rm -rf "$out" && mkdir -p "$out/api" "$out/trace"
status=0

echo "== 1. memprof.profile() on each rank, no device given (the native core of .device/)"
PYTHONPATH=$repo/src/wheel MEMPROF_NATIVE=$repo/.device/libmemprof.so \
  torchrun --standalone --nproc-per-node 2 fixtures/multigpu/inprocess_rank.py "$out/api" || status=1
python3 - "$out/api" <<'PY' || status=1
import json, sys
ok = True
for rank in range(2):
    r = json.load(open(f"{sys.argv[1]}/inprocess.rank{rank}.json"))
    good = (r["report_device"] == rank == r["device"] and r["report_peak"] == r["max_memory_allocated"]
            and r["peak_above_start"] == r["max_memory_allocated"] - r["before"])
    ok &= good
    print("%s   rank %d: report on cuda:%s, peak %s B, max_memory_allocated %d B, above start %s B"
          % ("ok" if good else "FAIL", rank, r["report_device"], r["report_peak"],
             r["max_memory_allocated"], r["peak_above_start"]))
sys.exit(0 if ok else 1)
PY

echo "== 2. --trace with no flags: each rank's trace is its own device's"
(cd "$out/trace" && torchrun --standalone --nproc-per-node 2 --no-python "$repo/.device/memprof" run \
  --trace "t.{rank}.json" -o "p.{rank}.json" "$repo/fixtures/multigpu/ddp.py" "$out/trace") || status=1
python3 - "$out/trace" <<'PY' || status=1
import json, sys
ok = True
for rank in range(2):
    d = sys.argv[1]
    t, p = json.load(open(f"{d}/t.{rank}.json")), json.load(open(f"{d}/p.{rank}.json"))
    truth = json.load(open(f"{d}/truth.rank{rank}.json"))
    live = top = 0
    sizes = {}
    for e in t["events"]:
        if "alloc" in e:
            sizes[e["alloc"]] = e["size"]
            live += e["size"]
            top = max(top, live)
        elif "free" in e:
            live -= sizes.pop(e["free"], 0)
    batch = 2048 * (4 if rank == 1 else 1) * 1024 * 4
    peak = p["peak"]["allocated_bytes"]
    good = (p["metadata"]["device"]["index"] == rank and peak == truth["max_memory_allocated"]
            and 0.99 * peak <= top <= peak and any(e.get("size") == batch for e in t["events"]))
    ok &= bool(good)
    print("%s   rank %d: cuda:%s, %d trace events, live requests at most %d B against the peak %d B"
          " (= max_memory_allocated %d B), this rank's batch (%d B) in the trace"
          % ("ok" if good else "FAIL", rank, p["metadata"]["device"]["index"], len(t["events"]), top,
             peak, truth["max_memory_allocated"], batch))
sys.exit(0 if ok else 1)
PY
echo "gpu-multi-inprocess: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
