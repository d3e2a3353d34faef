#!/usr/bin/env bash
# What each of memprof's modes costs, by the method every GPU figure uses (issue 53): the
# resnet50 batch-32 SGD step and the GPT-2 124M step (bf16 autocast, fused AdamW, 12 x 1024),
# both from benches/workloads.py, through the wheel (its `memprof run` in the venv's own python):
#   python   the venv's python3, unprofiled: the baseline of each round
#   control  python3 again: its ratio to the baseline is the noise floor, printed beside each
#   none     memprof run (no flags)
#   f        memprof run -f STEP
#   modules  memprof run --modules
#   tensors  memprof run -f STEP --tensors (an inventory at the end of every step)
#   history  memprof run -f STEP --history FILE --warmup 5 --calls 3 (as docs/history.md has it)
# ROUNDS interleaved rounds (default 9), the variants' order shuffled in each round (seeded by
# the round), every process pinned to the same cores (CORES, default 2-9) and the same GPU;
# each process times STEPS steps after 5 of warm-up and reports its median step, wall (the step
# waited for) and GPU (CUDA events around it). Per round, each variant's ratio to the
# baseline's; the table gives median (min, max) over rounds beside the control's, and each
# mode's goal. CASES picks (default "resnet gpt2"), VARIANTS too. One device call per case fits
# in the 10 minutes a call may run:
#   run(command="CASES=resnet benches/modes_cost.sh", carry=[".device"])
# On a machine without a GPU (the script's own check, GPT-2's code at 2 layers of 64):
# DEVICE=cpu CASES=gpt2 TINY=1 STEPS=3 ROUNDS=2 MEMPROF=target/debug/memprof
# PYTHON=.venv/bin/python benches/modes_cost.sh
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-9}
cases=${CASES:-resnet gpt2}
variants=${VARIANTS:-python control none f modules tensors history}
steps=${STEPS:-30}
warmup=${WARMUP:-5}
device=${DEVICE:-cuda}
out=${OUT:-/tmp/memprof-modes-cost}
mkdir -p "$out" && rm -f "$out"/*.txt "$out"/*.log
if [ -z "${PYTHON:-}" ]; then
  # The GPU machine: the wheel (.device/wheel) installed into its venv, as a user has it.
  venv=/opt/torch/.venv
  export PATH=$venv/bin:$PATH
  if command -v uv >/dev/null; then
    uv pip install --quiet --python "$venv/bin/python" --no-deps .device/wheel/*.whl
  else
    /usr/bin/python3 -m pip --python "$venv/bin/python" install --quiet --no-deps \
      --break-system-packages .device/wheel/*.whl
  fi
  PYTHON=$venv/bin/python MEMPROF=${MEMPROF:-$venv/bin/memprof}
fi
python=$PYTHON memprof=$MEMPROF
# memprof run finds the python of the venv first on PATH.
export PATH=$(dirname "$python"):$PATH
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
# Where the GPU machine's own torch libraries would otherwise be found first.
unset LD_LIBRARY_PATH VIRTUAL_ENV
# The same cores for every process (not core 0, where interrupts land, where there are enough).
pin=()
cores=${CORES:-$([ "$(nproc)" -ge 10 ] && echo 2-9 || echo "0-$(($(nproc) - 1))")}
command -v taskset >/dev/null && pin=(taskset -c "$cores")
batch=(); [ -z "${BATCH:-}" ] || batch=(--batch "$BATCH")
[ -z "${TINY:-}" ] || batch+=(--tiny)
{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  date -u; "$python" --version; echo "memprof: $("$memprof" --version | head -1) ($memprof)"
  echo "rounds $rounds, $steps steps after $warmup of warm-up per process, pinned: ${pin[*]:-no}"; } |
  tee "$out/machine.txt"
one() { # case, variant: one process; its BENCH line goes to $out/case-variant.txt
  local c=$1 v=$2 fn=train_step
  [ "$c" = gpt2 ] && fn=gpt2_train_step
  local w=(benches/workloads.py "$c" --device "$device" --warmup "$warmup" --repeats "$steps" "${batch[@]}")
  local cmd
  case $v in
    python|control) cmd=("$python" "${w[@]}") ;;
    none) cmd=("$memprof" run -o "$out/$c-$v.json" "${w[@]}") ;;
    f) cmd=("$memprof" run -f "$fn" -o "$out/$c-$v.json" "${w[@]}") ;;
    modules) cmd=("$memprof" run --modules -o "$out/$c-$v.json" "${w[@]}") ;;
    tensors) cmd=("$memprof" run -f "$fn" --tensors -o "$out/$c-$v.json" "${w[@]}") ;;
    history) cmd=("$memprof" run -f "$fn" --history "$out/$c.pickle" --warmup 5 --calls 3
                  -o "$out/$c-$v.json" "${w[@]}") ;;
    *) echo "modes_cost: unknown variant $v" >&2; exit 2 ;;
  esac
  "${pin[@]}" "${cmd[@]}" >"$out/$c-$v.log" 2>&1 || echo "$c $v failed: $(tail -3 "$out/$c-$v.log")"
  grep -h '^BENCH' "$out/$c-$v.log" >>"$out/$c-$v.txt"
}
for round in $(seq "$rounds"); do
  for c in $cases; do
    order=$("$python" -c 'import random, sys; v = sys.argv[2:]; random.Random(int(sys.argv[1])).shuffle(v); print(*v)' "$round" $variants)
    echo "round $round $c: $order"
    for v in $order; do one "$c" "$v"; done
  done
done
"$python" benches/modes_table.py "$out" $cases -- $variants | tee "$out/table.md"
