#!/usr/bin/env bash
# Issue 53's in-process method (benches/paired_cost.py): what each mode costs the resnet50 and
# GPT-2 steps, with profiled and unprofiled blocks of steps alternating inside each process,
# through the wheel (`import memprof` in the GPU machine's venv). PROCS processes per GPU
# (default 2) per case, one after another, each with ROUNDS rounds (default 16) of STEPS steps
# per variant (default 6, the first of each block not counted); every GPU in GPUS at once, each
# process pinned to its GPU's cores as benches/modes_cost.sh pins them. Then the table
# (benches/paired_table.py). On the GPU machine:
#   run(command="GPUS='0 1 2 3' benches/paired_cost.sh", kind="nvidia-h100-x4", carry=[".device"])
# On a machine without a GPU (the script's own check):
#   DEVICE=cpu TINY=1 CASES=gpt2 ROUNDS=2 STEPS=3 PROCS=1 PYTHON=.venv/bin/python benches/paired_cost.sh
# and a step whose time follows its launching thread's, as resnet50's does on an H100 or H200
# (what the per-allocation work costs, measurable without a GPU):
#   DEVICE=cpu CASES=mlp PROCS=1 PYTHON=.venv/bin/python benches/paired_cost.sh
# LEAD=N runs N more steps, uncounted, at the start of every block (inside its session): each
# block then measures a session's steady state, as a training run's later steps pay it, not its
# first steps (a fresh session's timeline has a point per event at first and merges its points
# at each doubling of their width; default 0, the method as before).
set -uo pipefail
cd "$(dirname "$0")/.."
cases=${CASES:-resnet gpt2}
variants=${VARIANTS:-none,f,modules,tensors}
rounds=${ROUNDS:-16} steps=${STEPS:-6} procs=${PROCS:-2} device=${DEVICE:-cuda} lead=${LEAD:-0}
out=/tmp/memprof-paired-cost
rm -rf "$out" && mkdir -p "$out"
if [ -z "${PYTHON:-}" ]; then
  . benches/device_wheel.sh
  PYTHON=$device_venv/bin/python
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
unset LD_LIBRARY_PATH VIRTUAL_ENV
. benches/gpu_cores.sh
extra=(); [ -z "${TINY:-}" ] || extra=(--tiny)
{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  date -u; "$PYTHON" --version; "$PYTHON" -c 'import memprof, sys; print("memprof", memprof.__file__)'
  echo "$procs processes per GPU per case over GPUs ${gpus[*]}; $rounds rounds of $steps steps per variant (after $lead more)"; } |
  tee "$out/machine.txt"
worker() { # the processes of GPU number i
  local i=$1 gpu=${gpus[$1]} cores pin=()
  cores=$(cores_of "$i")
  command -v taskset >/dev/null && pin=(taskset -c "$cores")
  for p in $(seq 1 "$procs"); do
    for c in $cases; do
      local log=$out/$c-gpu$gpu-$p.log
      CUDA_VISIBLE_DEVICES=$gpu "${pin[@]}" "$PYTHON" benches/paired_cost.py "$c" --device "$device" \
        --rounds "$rounds" --steps "$steps" --lead "$lead" --variants "$variants" --seed $((i * 100 + p)) \
        "${extra[@]}" >"$log" 2>&1 || echo "gpu $gpu: $c process $p failed: $(tail -3 "$log")"
      grep -h '^BENCH' "$log" >>"$out/bench.txt"
    done
  done
}
for i in "${!gpus[@]}"; do worker "$i" & done
wait
"$PYTHON" benches/paired_table.py "$out/bench.txt" | tee "$out/table.md"
if [ -n "${OUT:-}" ]; then
  cp "$out/table.md" "$out/machine.txt" "$OUT/" 2>/dev/null
  tar czf "$OUT/paired-cost.tgz" -C "$out" .
fi
