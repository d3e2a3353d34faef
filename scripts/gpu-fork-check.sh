#!/usr/bin/env bash
# On the GPU machine, through the wheel (benches/device_wheel.sh; NATIVE=<dir> puts that build's
# `_native.so` and `torch_shims/` in its place): fixtures/fork_while_recording.py under
# `memprof run` must end (within TIMEOUT, default 300 s) with python's own output, its DataLoader
# workers forked while memprof's recording thread works (MEMPROF_TRACKER_THREAD=1, set here).
#   run(command="NATIVE=.device/pb-new scripts/gpu-fork-check.sh", carry=[".device/wheel", ".device/pb-new"])
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/device_wheel.sh
lib=/tmp/memprof-fork-check
rm -rf "$lib" && install_build "${NATIVE:-.device/wheel}" "$lib" || exit 1
unset LD_LIBRARY_PATH VIRTUAL_ENV
plain=$("$device_venv/bin/python" fixtures/fork_while_recording.py) || exit 1
profiled=$(MEMPROF_TRACKER_THREAD=1 PYTHONPATH=$lib timeout "${TIMEOUT:-300}" "$device_venv/bin/python" -m memprof run \
  -o /tmp/memprof-fork-check.json fixtures/fork_while_recording.py)
status=$?
echo "python: $plain"
echo "memprof run (exit $status): $profiled"
[ "$status" = 0 ] && [ "$plain" = "$profiled" ] && echo "fork check: PASSED" && exit 0
echo "fork check: FAILED"
exit 1
