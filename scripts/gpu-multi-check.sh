#!/usr/bin/env bash
# The multi-GPU acceptance run, in one device call on two GPUs (kind nvidia-h200-x2), after
# scripts/build-device.sh here:
#   run(command="scripts/gpu-multi-check.sh", carry=[".device"], kind="nvidia-h200-x2")
# DDP (rank 1 with a 4x batch, set_device after start-up) and an FSDP2 training step under
# torchrun, each rank's report checked against what its program says itself; the merged view;
# the launch forms; compiled FSDP2 (per-block torch.compile) against the bare program; each rank's
# peak with no flags (DDP, FSDP2); and the CPU multi-rank suite
# (tests/ranks.rs) on this build. SKIP_COMPILED=1 leaves compiled FSDP2 out (its compiles take
# minutes: run it alone then).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
bin=$repo/.device/memprof
out=${OUT:-/tmp/multigpu}
mkdir -p "$out/ddp" "$out/fsdp" "$out/module"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
launch() { torchrun --standalone --nproc-per-node 2 --no-python "$bin" run "$@"; }
status=0

echo "== DDP: torchrun --nproc-per-node 2 --no-python memprof run -f start_up -f train_step --collectives ddp.py (rank 0 prints)"
(cd "$out/ddp" && launch -f start_up -f train_step --collectives "$repo/fixtures/multigpu/ddp.py" "$out/ddp") || status=1
python3 scripts/multigpu_check.py ddp "$out/ddp" "$out/ddp/memprof.rank{rank}.json" || status=1
echo "== memprof merge memprof.rank*.json"
"$bin" merge "$out"/ddp/memprof.rank*.json || status=1
"$bin" --stat allocated_bytes.all.peak merge "$out"/ddp/memprof.rank*.json || status=1

echo "== the -m form and --all-ranks: cd fixtures/multigpu && ... memprof run --all-ranks -f train_step -m ddp"
(cd fixtures/multigpu && launch --all-ranks --stat allocated_bytes.all.peak -f train_step \
  -o "$out/module/ddp.json" -m ddp "$out/module") || status=1
ls "$out/module"

echo "== FSDP2: memprof run -f train_step --modules --collectives --depth 2 fsdp.py"
(cd "$out/fsdp" && launch -f train_step --modules --collectives --depth 2 --tensors \
  --stat allocated_bytes.all.peak,reserved_bytes.all.peak -o "f.{rank}.json" --format json \
  "$repo/fixtures/multigpu/fsdp.py" "$out/fsdp") || status=1
python3 scripts/multigpu_check.py fsdp "$out/fsdp" "$out/fsdp/f.{rank}.json" || status=1
"$bin" show "$out/fsdp/f.0.json" || status=1
"$bin" merge "$out"/fsdp/f.*.json || status=1

if [ -z "${SKIP_COMPILED:-}" ]; then
echo "== compiled FSDP2 (issue 24): fsdp.py --compile (each block compiled, then sharded), bare and memprof -f train_step --modules --collectives, each twice on one inductor cache, the second runs compared"
fc=$out/fsdp-compiled
mkdir -p "$fc/bare" "$fc/memprof"
export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
for i in 1 2; do
  (cd "$fc/bare" && torchrun --standalone --nproc-per-node 2 "$repo/fixtures/multigpu/fsdp.py" "$fc/bare" --compile >"$fc/bare/run$i.log" 2>&1) || { status=1; tail -5 "$fc/bare/run$i.log"; }
  (cd "$fc/memprof" && launch -f train_step --modules --collectives -o "f.{rank}.json" --format json \
    "$repo/fixtures/multigpu/fsdp.py" "$fc/memprof" --compile >"$fc/memprof/run$i.log" 2>&1) || { status=1; tail -5 "$fc/memprof/run$i.log"; }
done
unset TORCHINDUCTOR_CACHE_DIR
python3 scripts/multigpu_check.py fsdp-compiled "$fc/memprof" "$fc/memprof/f.{rank}.json" "$fc/bare" || status=1
"$bin" show "$fc/memprof/f.0.json" | sed -n '/^Modules/,$p' | head -45
fi

echo "== the peak per rank (issues 24, 37): memprof run with no flags, DDP and FSDP2, each rank on its own device"
mkdir -p "$out/peak-ddp" "$out/peak-fsdp"
(cd "$out/peak-ddp" && launch -o "p.{rank}.json" "$repo/fixtures/multigpu/ddp.py" "$out/peak-ddp") || status=1
python3 scripts/multigpu_check.py ddp-peak "$out/peak-ddp" "$out/peak-ddp/p.{rank}.json" || status=1
"$bin" merge "$out"/peak-ddp/p.*.json || status=1
# merge names rank 1 (its 4x batch) as the max, and no rank as without a peak.
"$bin" merge --format json "$out"/peak-ddp/p.*.json >"$out/peak-ddp/merged.json" &&
  python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["peak"]
ok = p["allocated_bytes"]["max_rank"] == 1 and not p.get("ranks_without_peak") and len(p["ranks"]) == 2
print("%s   merge: max on rank %s, ranks with a peak %d, without %s" % ("ok" if ok else "FAIL", p["allocated_bytes"]["max_rank"], len(p["ranks"]), p.get("ranks_without_peak", [])))
sys.exit(0 if ok else 1)' "$out/peak-ddp/merged.json" || status=1
(cd "$out/peak-fsdp" && launch -o "p.{rank}.json" "$repo/fixtures/multigpu/fsdp.py" "$out/peak-fsdp") || status=1
python3 scripts/multigpu_check.py fsdp-peak "$out/peak-fsdp" "$out/peak-fsdp/p.{rank}.json" || status=1
"$bin" merge "$out"/peak-fsdp/p.*.json || status=1

echo "== one process, set_device(1) after CUDA started on cuda:0, no flags, no launcher (issue 37)"
mkdir -p "$out/switch"
(cd "$out/switch" && "$bin" run -o p.json "$repo/fixtures/multigpu/switch_device.py" "$out/switch") || status=1
python3 -c 'import json, sys
d = sys.argv[1]
r, t = json.load(open(d + "/p.json")), json.load(open(d + "/truth.json"))
p = r["peak"]
parts = sum(s["bytes"] for s in p["sites"]) + (p.get("other_sites") or {}).get("bytes", 0) + p["unseen_bytes"]
warned = [w for w in r.get("warnings", []) if "also allocated on cuda:0" in w]
ok = (r["metadata"]["device"]["index"] == 1 and p["allocated_bytes"] == t["max_memory_allocated"][1]
      and parts == p["allocated_bytes"] and bool(warned))
print("%s   measured cuda:%s, peak %d B = cuda:1 max_memory_allocated %d B, sites %d B; %s" % (
    "ok" if ok else "FAIL", r["metadata"]["device"]["index"], p["allocated_bytes"],
    t["max_memory_allocated"][1], parts, warned))
sys.exit(0 if ok else 1)' "$out/switch" || status=1

echo "== tests/ranks.rs (gloo on the CPU) with this build"
MEMPROF_BIN=$bin MEMPROF_REPO=$repo MEMPROF_TEST_DEVICE=cpu .device/tests/integration ranks:: --test-threads 2 || status=1
echo "== the in-process API and --trace on each rank (issue 37): scripts/gpu-multi-inprocess.sh"
scripts/gpu-multi-inprocess.sh || status=1
echo "gpu-multi-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
