#!/usr/bin/env bash
# On the GPU machine, in one device call (after scripts/build-device.sh here): profiles
# examples/train.py (resnet50, 3 steps) with --modules and -f train_step, draws the report with
# `memprof plot` as PNG and SVG into $OUT (the README's pictures, committed under docs/), and
# prints the numbers each plot shows, to check them against the report. With two GPUs, also a
# DDP run's ranks drawn together ($OUT/ranks.png).
set -uo pipefail
cd "$(dirname "$0")/.."
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
out=${OUT:-/tmp}
status=0
.device/memprof run --modules -f train_step --format json -o "$out/train.json" \
  --plot "$out/train.png" examples/train.py --steps 3 || status=1
.device/memprof plot "$out/train.json" -o "$out/train.svg" || status=1
python3 - "$out/train.json" <<'PY' || status=1
import json, sys
r = json.load(open(sys.argv[1]))
m = r["modules"]
peak = max((e.get("peak_bytes") or 0) for e in m["timeline"])
f = next(f for f in r["functions"] if f["qualname"] == "train_step")
print("timeline calls", len(m["timeline"]), "dropped", m["timeline_dropped"], "max peak", peak)
print("train_step peak_allocated_bytes", f["peak_allocated_bytes"])
for l in f["lines"]:
    if l["hits"]:
        print("  line", l["line"], "delta", l["delta_bytes"], "peak", l["stats"].get("allocated_bytes.all.peak"))
PY
# On a machine with two GPUs (kind nvidia-h200-x2): fixtures/multigpu/ddp.py under torchrun
# (rank 1 trains on a 4x batch), one report per rank, drawn together: one series per rank.
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  mkdir -p "$out/ddp"
  repo=$PWD
  (cd "$out/ddp" && torchrun --standalone --nproc-per-node 2 --no-python "$repo/.device/memprof" run \
    --modules -f train_step --format json -o "ddp.rank{rank}.json" "$repo/fixtures/multigpu/ddp.py" "$out/ddp") || status=1
  .device/memprof plot "$out"/ddp/ddp.rank*.json -o "$out/ranks.png" || status=1
  rm -f "$out"/ddp/truth.*
fi
ls -la "$out"
echo "gpu-plots: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
