#!/usr/bin/env bash
# What `--modules` costs (issue 40), on the GPU machine: the resnet50 batch-32 step
# (benches/workloads.py) and the GPT-2 124M step (examples/gpt2_train.py: bf16 autocast, fused
# AdamW, 12 x 1024, GPT2_STEPS steps, default 32) under plain python3, `memprof run` with no
# flags, and `memprof run --modules` of BEFORE (default .device/prev/memprof, the build before a
# change) and AFTER (default .device/memprof), the variants interleaved, ROUNDS rounds (default
# 3); each process's median step, and per round its ratio to python3's; then whether every
# module row (calls, peak, saved bytes) of the last round's reports is the same before and after.
# With WHEEL=1 AFTER's --modules also runs through the user's path: the wheel (.device/wheel)
# installed into the machine's venv, `memprof run` in its python. CASES="resnet" or "gpt2" runs
# one; BENCH_OUT is where the logs go. One device call (scripts/gpu-modules.sh runs it too):
#   run(command="benches/modules_cost.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-/tmp/memprof-modules-cost}
rounds=${ROUNDS:-3}
cases=${CASES:-resnet gpt2}
before=${BEFORE:-.device/prev/memprof}
after=${AFTER:-.device/memprof}
mkdir -p "$out" && rm -f "$out"/*.txt
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; python3 --version
  for b in "$before" "$after"; do echo "$b: $("$b" --version)"; done; } | tee "$out/machine.txt"
wheel_memprof=
if [ "${WHEEL:-0}" = 1 ]; then
  . benches/device_wheel.sh
  wheel_memprof=$device_venv/bin/memprof
fi
one() { # name, then the command: appends the process's BENCH line to $out/name.txt
  local name=$1; shift
  "$@" >"$out/$name.log" 2>&1 || echo "$name failed: $(tail -3 "$out/$name.log")"
  grep -h '^BENCH' "$out/$name.log" >>"$out/$name.txt"
}
variants() { # case, then the workload's command line
  local c=$1; shift
  one "$c-python" python3 "$@"
  one "$c-none" "$after" run -o "$out/$c-none.json" "$@"
  one "$c-before" "$before" run --modules -o "$out/$c-before.json" "$@"
  one "$c-after" "$after" run --modules -o "$out/$c-after.json" "$@"
  [ -z "$wheel_memprof" ] || one "$c-wheel" env -u LD_LIBRARY_PATH -u VIRTUAL_ENV "$wheel_memprof" run --modules -o "$out/$c-wheel.json" "$@"
}
for round in $(seq "$rounds"); do
  echo "round $round"
  [[ " $cases " != *" resnet "* ]] || variants resnet benches/workloads.py resnet
  [[ " $cases " != *" gpt2 "* ]] || variants gpt2 examples/gpt2_train.py --steps ${GPT2_STEPS:-32} --bench
done
python3 benches/rounds_table.py "$out" \
  "resnet=resnet50, batch 32, SGD;gpt2=GPT-2 124M, bf16 autocast, fused AdamW, 12 x 1024" \
  "python=python3;none=memprof run, no flags;before=memprof run --modules, before;after=memprof run --modules;wheel=memprof run --modules, the wheel in the venv's python"
# The same numbers before and after, module by module (the last round's reports).
for c in $cases; do
  [ -f "$out/$c-before.json" ] && [ -f "$out/$c-after.json" ] &&
    python3 benches/modules_rows.py "$c" "$out/$c-before.json" "$out/$c-after.json"
done
