#!/usr/bin/env bash
# Whether two builds record the same `--history` on CUDA: scripts/history_parity.py (resnet50's
# step under `memprof.profile(train_step, history=...)`) run with each build of BUILDS
# ("label=dir ...", as benches/paired_builds.sh takes them), each RUNS times (default 2), and each line printed:
# the same digest from every run is the same events with the same whole stacks.
#   run(command="BUILDS='before=.device/wheel after=.device/pb-k' scripts/gpu-history-parity.sh",
#       carry=[".device/wheel", ".device/pb-k"])
set -uo pipefail
cd "$(dirname "$0")/.."
out=/tmp/memprof-history-parity
rm -rf "$out" && mkdir -p "$out"
. benches/device_wheel.sh
unset LD_LIBRARY_PATH VIRTUAL_ENV
for b in $BUILDS; do
  label=${b%%=*} dir=${b#*=}
  install_build "$dir" "$out/$label" || exit 1
done
for r in $(seq "${RUNS:-2}"); do
  for b in $BUILDS; do
    label=${b%%=*}
    echo "$label run $r: $(PYTHONPATH=$out/$label "$device_venv/bin/python" scripts/history_parity.py \
      "${STEPS:-3}" 2>&1 | grep -E '^HISTORY|Error' | tail -1)"
  done
done
