#!/usr/bin/env bash
# Sourced by the benchmarks that run on the GPU machine: installs the wheel that
# scripts/build-device.sh left in .device/wheel into the machine's venv (as a user has it; uv's
# venv has no pip of its own) and sets `device_venv` to that venv.
device_venv=/opt/torch/.venv
if command -v uv >/dev/null; then
  uv pip install --quiet --python "$device_venv/bin/python" --no-deps .device/wheel/*.whl
else
  /usr/bin/python3 -m pip --python "$device_venv/bin/python" install --quiet --no-deps \
    --break-system-packages .device/wheel/*.whl
fi
