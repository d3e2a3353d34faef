#!/usr/bin/env bash
# Sourced by the benchmarks that profile the wheel on the GPU machine (cpu_profile.sh,
# paired_profile.sh): installs .device/wheel (benches/device_wheel.sh), puts NATIVE, where set,
# in place of the wheel's stripped native core (a build with its symbols:
# `../shared/gpu/build-for-device.sh --features wheel --lib` leaves one in
# target/device/release/libmemprof.so), and defines `pf`, the perf that PERF_DIR (default
# .device/perf, made by scripts/device/perf-bundle.sh) holds with its libraries: the GPU machine
# has none of its own.
. benches/device_wheel.sh
if [ -n "${NATIVE:-}" ]; then
  cp "$NATIVE" "$(ls "$device_venv"/lib/python3.*/site-packages/memprof/_native*.so)" || exit 1
  # Its torch shims, where they lie beside it (a build whose shim gained a function).
  if ls "$(dirname "$NATIVE")"/torch_shims/*.so >/dev/null 2>&1; then
    cp "$(dirname "$NATIVE")"/torch_shims/*.so \
      "$(ls -d "$device_venv"/lib/python3.*/site-packages/memprof/torch_shims)/" || exit 1
  fi
fi
perf_dir=$(realpath "${PERF_DIR:-.device/perf}")
pf() { LD_LIBRARY_PATH=$perf_dir/lib "$perf_dir/perf" "$@"; }
