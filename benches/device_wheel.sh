#!/usr/bin/env bash
# Sourced by the benchmarks that run on the GPU machine: installs the wheel that
# scripts/build-device.sh left in .device/wheel into the machine's venv (as a user has it; uv's
# venv has no pip of its own), sets `device_venv` to that venv, and defines `install_wheel
# WHEEL [pip options]` for another wheel, and `install_build DIR TARGET` for a build apart
# (paired_builds.sh, modules_rows.sh, scripts/gpu-fork-check.sh).
device_venv=/opt/torch/.venv
. scripts/device/venv-install.sh
install_wheel() { venv_install "$device_venv/bin/python" --no-deps "$@"; }
# The build in DIR installed apart into TARGET (pip --target): DIR's wheel, or .device/wheel's
# with DIR's native core (`_native.so`, as `../shared/gpu/build-for-device.sh --features wheel
# --lib` leaves it in target/device/release/libmemprof.so) in place of its own, and DIR's
# `torch_shims/` where the shim changed too.
install_build() {
  local dir=$1 target=$2 wheel
  wheel=$(ls "$dir"/*.whl 2>/dev/null | head -1)
  install_wheel --target "$target" "${wheel:-$(ls .device/wheel/*.whl | head -1)}" || return 1
  if [ -f "$dir/_native.so" ]; then
    cp "$dir/_native.so" "$(ls "$target"/memprof/_native*.so)" || return 1
  fi
  if ls "$dir"/torch_shims/*.so >/dev/null 2>&1; then
    cp "$dir"/torch_shims/*.so "$target/memprof/torch_shims/" || return 1
  fi
}
install_wheel .device/wheel/*.whl
