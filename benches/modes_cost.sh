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
#   live     memprof run --live, on a pseudo-terminal of its own (benches/on_a_pty.py), the view
#            drawn once a second all along
# ROUNDS interleaved rounds (default 9), the variants' order shuffled in each round (seeded by
# the round), every process pinned to the same cores and the same GPU; each process times STEPS
# steps after WARMUP and reports its median step, wall (the step waited for) and GPU (CUDA
# events around it). Per round, each variant's ratio to the baseline's; the table gives median
# (min, max) over rounds beside the control's, and each mode's goal. CASES picks (default
# "resnet gpt2"), VARIANTS too.
# A process takes about 15 s (start-up, torch, the model, 35 steps), so 9 rounds of 8 variants
# take 18 minutes on one GPU: GPUS="0 1 2 3" runs the rounds on each GPU at once, each GPU with
# its own cores (CORES_PER_GPU, default 8, from core 2) and its own rounds (a round's ratios are
# within one GPU, never across), so a 4-GPU machine runs 12 rounds in the time of 3:
#   run(command="GPUS='0 1 2 3' ROUNDS=12 benches/modes_cost.sh", kind="nvidia-h100-x4",
#       carry=[".device"])
# On a machine without a GPU (the script's own check, GPT-2's code at 2 layers of 64):
# DEVICE=cpu CASES=gpt2 TINY=1 STEPS=3 ROUNDS=2 MEMPROF=target/debug/memprof
# PYTHON=.venv/bin/python benches/modes_cost.sh
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-9}
cases=${CASES:-resnet gpt2}
variants=${VARIANTS:-python control none f modules tensors history live}
steps=${STEPS:-30}
warmup=${WARMUP:-5}
device=${DEVICE:-cuda}
out=/tmp/memprof-modes-cost
rm -rf "$out" && mkdir -p "$out"
if [ -z "${PYTHON:-}" ]; then
  # The GPU machine: the wheel (.device/wheel) installed into its venv, as a user has it.
  . benches/device_wheel.sh
  export PATH=$device_venv/bin:$PATH
  PYTHON=$device_venv/bin/python MEMPROF=${MEMPROF:-$device_venv/bin/memprof}
fi
python=$PYTHON memprof=$MEMPROF
# memprof run finds the python of the venv first on PATH.
export PATH=$(dirname "$python"):$PATH
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# Where the GPU machine's own torch libraries would otherwise be found first.
unset LD_LIBRARY_PATH VIRTUAL_ENV
. benches/gpu_cores.sh
batch=(); [ -z "${BATCH:-}" ] || batch=(--batch "$BATCH")
[ -z "${TINY:-}" ] || batch+=(--tiny)
{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
  date -u; "$python" --version; echo "memprof: $("$memprof" --version | head -1) ($memprof)"
  echo "rounds $rounds over GPUs ${gpus[*]}, $steps steps after $warmup of warm-up per process"; } |
  tee "$out/machine.txt"
one() { # dir, gpu, cores, case, variant: one process; its BENCH line goes to dir/case-variant.txt
  local dir=$1 gpu=$2 cores=$3 c=$4 v=$5 fn=train_step
  [ "$c" = gpt2 ] && fn=gpt2_train_step
  local w=(benches/workloads.py "$c" --device "$device" --warmup "$warmup" --repeats "$steps" "${batch[@]}")
  local cmd
  case $v in
    python|control) cmd=("$python" "${w[@]}") ;;
    none) cmd=("$memprof" run -o "$dir/$c-$v.json" "${w[@]}") ;;
    f) cmd=("$memprof" run -f "$fn" -o "$dir/$c-$v.json" "${w[@]}") ;;
    modules) cmd=("$memprof" run --modules -o "$dir/$c-$v.json" "${w[@]}") ;;
    tensors) cmd=("$memprof" run -f "$fn" --tensors -o "$dir/$c-$v.json" "${w[@]}") ;;
    history) cmd=("$memprof" run -f "$fn" --history "$dir/$c.pickle" --warmup 5 --calls 3
                  -o "$dir/$c-$v.json" "${w[@]}") ;;
    live) cmd=("$python" benches/on_a_pty.py "$dir/$c-$v.screen" "$memprof" run --live
               -o "$dir/$c-$v.json" "${w[@]}" --bench-out "$dir/$c-$v.bench") ;;
    *) echo "modes_cost: unknown variant $v" >&2; exit 2 ;;
  esac
  local pin=()
  command -v taskset >/dev/null && pin=(taskset -c "$cores")
  CUDA_VISIBLE_DEVICES=$gpu "${pin[@]}" "${cmd[@]}" >"$dir/$c-$v.log" 2>&1 ||
    echo "gpu $gpu: $c $v failed: $(tail -3 "$dir/$c-$v.log")"
  local line
  line=$(grep -h '^BENCH' "$dir/$c-$v.log" "$dir/$c-$v.bench" 2>/dev/null | head -1)
  rm -f "$dir/$c-$v.bench"
  # One line per round, `BENCH {}` for a process that failed: the table pairs the variants'
  # processes by their place in these files, round by round.
  echo "${line:-BENCH {\}}" >>"$dir/$c-$v.txt"
}
worker() { # the rounds of GPU number i (rounds i+1, i+1+n, ...)
  local i=$1 gpu=${gpus[$1]} dir=$out/gpu${gpus[$1]} cores
  cores=$(cores_of "$i")
  mkdir -p "$dir"
  for round in $(seq $((i + 1)) ${#gpus[@]} "$rounds"); do
    for c in $cases; do
      local order
      order=$("$python" -c 'import random, sys; v = sys.argv[2:]; random.Random(int(sys.argv[1])).shuffle(v); print(*v)' "$round" $variants)
      echo "round $round on GPU $gpu (cores $cores) $c: $order"
      for v in $order; do one "$dir" "$gpu" "$cores" "$c" "$v"; done
    done
  done
}
for i in "${!gpus[@]}"; do worker "$i" & done
wait
"$python" benches/modes_table.py "$out" $cases -- $variants | tee "$out/table.md"
# On the GPU machine, what comes back: the table and every process's log and numbers, packed.
if [ -n "${OUT:-}" ]; then
  cp "$out/table.md" "$out/machine.txt" "$OUT/" && tar czf "$OUT/modes-cost.tgz" -C "$out" .
fi
