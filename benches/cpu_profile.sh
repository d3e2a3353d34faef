#!/usr/bin/env bash
# Where the resnet50 step's (CASE=gpt2: GPT-2's) CPU time goes, python3 alone and under the wheel's
# `memprof run`: perf sampling each process (cpu-clock: the GPU hosts' virtual machines have no
# hardware counters) over exactly its timed steps (benches/workloads.py tells perf through a control
# fifo when they start and end), so that the processes' sample counts compare one for one: by
# library, by thread, then by function, and memprof's own functions. The GPU machine has no perf:
# PERF_DIR (default .device/perf, made here by scripts/device/perf-bundle.sh) holds the build
# machine's with the libraries it needs. The wheel's native core is stripped; NATIVE names a build
# of it with its symbols to put in its place (here: `../shared/gpu/build-for-device.sh --features
# wheel --lib` leaves one in target/device/release/libmemprof.so; copy it under .device/perf). STEPS
# timed steps per process (default 1000). VARIANTS: `python` and memprof run's flags per process,
# `none` for no flags, `f` for `-f` on the case's step function (default "python none"; e.g. "python
# none --modules"), `history` for `-f` with `--history` (its file under /tmp); FLAGS (the earlier
# form) runs python3 and `memprof run $FLAGS`. Samples are of every thread of the process (the
# CUDA driver's, BLAS's idle spinners). OUT, where set, receives each process's per-function
# counts. On the GPU machine:
#   run(command="NATIVE=.device/perf/_native.so VARIANTS='python none --modules' benches/cpu_profile.sh", carry=[".device/wheel", ".device/perf"])
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/device_perf.sh
. benches/gpu_cores.sh
pf --version || exit 1
out=/tmp/memprof-cpu-profile
rm -rf "$out" && mkdir -p "$out"
steps=${STEPS:-1000}
case_=${CASE:-resnet}
step_fn=train_step
[ "$case_" != gpt2 ] || step_fn=gpt2_train_step
unset VIRTUAL_ENV
fifo=$out/ctl.fifo
variants=${VARIANTS:-python none}
[ -z "${FLAGS:-}" ] || [ -n "${VARIANTS:-}" ] || variants="python flags"
for v in $variants; do
  name=${v#--}
  cmd=("$device_venv/bin/python" benches/workloads.py "$case_" --repeats "$steps")
  if [ "$v" != python ]; then
    flags=()
    [ "$v" = none ] || flags=("$v")
    [ "$v" != f ] || flags=(-f "$step_fn")
    [ "$v" != history ] || flags=(-f "$step_fn" --history "$out/history.pickle")
    [ "$v" != flags ] || read -ra flags <<<"$FLAGS"
    cmd=("$device_venv/bin/memprof" run "${flags[@]}" -o "$out/report.json"
      benches/workloads.py "$case_" --repeats "$steps")
  fi
  rm -f "$fifo" && mkfifo "$fifo"
  pf record -e cpu-clock -F 2999 -D -1 --control "fifo:$fifo" -o "$out/$name.data" -- \
    env -u LD_LIBRARY_PATH BENCH_PERF_CTL="$fifo" taskset -c "$(cores_of 0)" "${cmd[@]}" \
    >"$out/$name.log" 2>&1 || tail -5 "$out/$name.log"
  echo "== $v: $(grep -o '"times": \[[^]]*' "$out/$name.log" | cut -c1-120)"
  pf report -n -i "$out/$name.data" --no-children --sort dso -g none 2>/dev/null | grep -E '^#.*Samples|^ ' | head -16
  pf report -n -i "$out/$name.data" --no-children --sort comm -g none 2>/dev/null | grep '^ '
  pf report -n -i "$out/$name.data" --no-children --sort comm,dso,sym -g none 2>/dev/null | grep '^ ' \
    >"$out/$name.functions.txt"
  head -30 "$out/$name.functions.txt"
  grep -E '_native|memprof_torch' "$out/$name.functions.txt" | head -40
done
[ -z "${OUT:-}" ] || cp "$out"/*.log "$out"/*.functions.txt "$OUT/"
