#!/usr/bin/env bash
# Whether a change made a mode cheaper: benches/paired_cost.sh (the in-process method) run once
# per build in turn, REPEATS times (default 2), so that the builds alternate in time on the same
# machine. BUILDS names them, "label=dir ...", each dir holding one build's wheel (as
# scripts/build-device.sh leaves it in .device/wheel), or only its native core (`_native.so`,
# as `../shared/gpu/build-for-device.sh --features wheel --lib` leaves it in
# target/device/release/libmemprof.so), which then replaces .device/wheel's (a change to the
# Rust or C++ code alone, compared without a wheel built for each), with `torch_shims/` beside
# it where the shim changed too (target/device/release/torch_shims); each is installed apart
# (pip --target) and put first on PYTHONPATH, and each ratio stays within one process (a
# build's profiled blocks against its own unprofiled ones). CASES, VARIANTS, GPUS, PROCS,
# ROUNDS, STEPS, LEAD as paired_cost.sh. Then one table per build over all its repeats. On the GPU
# machine:
#   run(command="BUILDS='before=.device/wheel-before after=.device/wheel' CASES=resnet VARIANTS=none GPUS='0 1 2 3' benches/paired_builds.sh", kind="nvidia-h100-x4", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
repeats=${REPEATS:-2}
out=/tmp/memprof-paired-builds
rm -rf "$out" && mkdir -p "$out"
. benches/device_wheel.sh
for b in $BUILDS; do
  label=${b%%=*} dir=${b#*=}
  install_build "$dir" "$out/$label/lib" || exit 1
done
for r in $(seq "$repeats"); do
  for b in $BUILDS; do
    label=${b%%=*}
    echo "repeat $r: $label"
    PYTHONPATH=$out/$label/lib PYTHON=$device_venv/bin/python benches/paired_cost.sh \
      >"$out/$label/run$r.txt" 2>&1
    grep -h '^memprof ' /tmp/memprof-paired-cost/machine.txt
    cat /tmp/memprof-paired-cost/bench.txt >>"$out/$label/bench.txt"
  done
done
head -3 /tmp/memprof-paired-cost/machine.txt
for b in $BUILDS; do
  label=${b%%=*}
  echo "## $label"
  "$device_venv/bin/python" benches/paired_table.py "$out/$label/bench.txt"
done | tee "$out/tables.md"
[ -z "${OUT:-}" ] || cp "$out/tables.md" "$OUT/"
