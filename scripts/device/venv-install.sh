#!/usr/bin/env bash
# Sourced by the scripts that install into the GPU machine's venv (benches/device_wheel.sh,
# scripts/gpu-check.sh, scripts/gpu-inprocess-check.sh): `venv_install PYTHON ARGS...` runs
# `pip install ARGS...` for the venv whose interpreter is PYTHON, through uv where the machine
# has it (uv's venv has no pip of its own), else through the system python's pip.
venv_install() {
  local python=$1
  shift
  if command -v uv >/dev/null; then
    uv pip install --quiet --python "$python" "$@"
  else
    /usr/bin/python3 -m pip --python "$python" install --quiet --break-system-packages "$@"
  fi
}
