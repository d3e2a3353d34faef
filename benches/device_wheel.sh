#!/usr/bin/env bash
# Sourced by the benchmarks that run on the GPU machine: installs the wheel that
# scripts/build-device.sh left in .device/wheel into the machine's venv (as a user has it; uv's
# venv has no pip of its own), sets `device_venv` to that venv, and defines `install_wheel
# WHEEL [pip options]` for another wheel (paired_builds.sh installs each build apart).
device_venv=/opt/torch/.venv
install_wheel() {
  if command -v uv >/dev/null; then
    uv pip install --quiet --python "$device_venv/bin/python" --no-deps "$@"
  else
    /usr/bin/python3 -m pip --python "$device_venv/bin/python" install --quiet --no-deps \
      --break-system-packages "$@"
  fi
}
install_wheel .device/wheel/*.whl
