#!/usr/bin/env bash
# Where the resnet50 step's CPU time goes, python3 alone and under the wheel's `memprof run` (no
# flags): perf sampling each process (cpu-clock: the GPU hosts' virtual machines have no hardware
# counters), by library, then by function, then memprof's own functions. The GPU machine has no
# perf: PERF_DIR (default .device/perf, made here by scripts/device/perf-bundle.sh) holds the build
# machine's with the libraries it needs. The wheel's native core is stripped; NATIVE names a build
# of it with its symbols to put in its place (here: `../shared/gpu/build-for-device.sh --features
# wheel --lib` leaves one in target/device/release/libmemprof.so; copy it under .device/perf).
# STEPS timed steps per process (default 1000, so that the steps outweigh the set-up). Samples
# are of every thread of the process (the CUDA driver's, BLAS's idle spinners), so compare the
# two processes' shares, not a share with the step's time. FLAGS: memprof run's flags (e.g.
# --modules); DELAY: milliseconds before perf starts sampling (e.g. 20000: the steady state,
# after start-up and warm-up). On the GPU machine:
#   run(command="NATIVE=.device/perf/_native.so benches/cpu_profile.sh", carry=[".device/wheel", ".device/perf"])
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/device_wheel.sh
if [ -n "${NATIVE:-}" ]; then
  cp "$NATIVE" "$(ls "$device_venv"/lib/python3.*/site-packages/memprof/_native*.so)" || exit 1
fi
. benches/gpu_cores.sh
perf_dir=$(realpath "${PERF_DIR:-.device/perf}")
pf() { LD_LIBRARY_PATH=$perf_dir/lib "$perf_dir/perf" "$@"; }
pf --version || exit 1
out=/tmp/memprof-cpu-profile
rm -rf "$out" && mkdir -p "$out"
steps=${STEPS:-1000}
unset VIRTUAL_ENV
for v in python memprof; do
  cmd=("$device_venv/bin/python" benches/workloads.py resnet --repeats "$steps")
  [ "$v" = memprof ] && cmd=("$device_venv/bin/memprof" run ${FLAGS:-} -o "$out/report.json"
    benches/workloads.py resnet --repeats "$steps")
  pf record -e cpu-clock -F 2999 -D "${DELAY:-0}" -o "$out/$v.data" -- env -u LD_LIBRARY_PATH \
    taskset -c "$(cores_of 0)" "${cmd[@]}" >"$out/$v.log" 2>&1 || tail -5 "$out/$v.log"
  echo "== $v: $(grep -o '"times": \[[^]]*' "$out/$v.log" | cut -c1-200)"
  pf report -i "$out/$v.data" --no-children --sort dso -g none 2>/dev/null | grep -E '^#.*Samples|^ ' | head -26
  pf report -i "$out/$v.data" --no-children --sort dso,sym -g none 2>/dev/null | grep '^ ' \
    >"$out/$v.functions.txt"
  head -30 "$out/$v.functions.txt"
  grep -E '_native|memprof_torch' "$out/$v.functions.txt" | head -40
done
[ -z "${OUT:-}" ] || cp "$out"/*.log "$OUT/"
