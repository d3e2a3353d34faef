#!/usr/bin/env bash
# Where each mode's cost goes on the resnet50 (CASE=gpt2: GPT-2) step, with the host's noise
# cancelled: `perf record` of one benches/paired_cost.py process whose blocks alternate between
# unprofiled (base, control) and VARIANTS (default "modules,history"), each sample given to the
# block whose step ran then (benches/paired_profile.py): CPU ms per step by thread, library and
# function, each variant against `base` (AGAINST: another variant), with `control - base` as the
# noise floor. Through the wheel, NATIVE and PERF_DIR as benches/device_perf.sh takes them.
# ROUNDS (default 12) rounds of STEPS (default 6) steps per variant, sampled at HZ (default 4999).
# On the GPU machine:
#   run(command="NATIVE=.device/native/libmemprof.so benches/paired_profile.sh",
#       carry=[".device/wheel", ".device/perf", ".device/native"])
# Here, on the CPU (the launch-bound MLP step, this machine's perf and the development set-up's
# memprof; MEMPROF_NATIVE picks a build):
#   PYTHON=.venv/bin/python CASE=mlp DEVICE=cpu benches/paired_profile.sh
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then
  python=$PYTHON
  pf() { perf "$@"; }
else
  . benches/device_perf.sh
  python=$device_venv/bin/python
fi
. benches/gpu_cores.sh
pf --version >/dev/null || exit 1
out=/tmp/memprof-paired-profile
rm -rf "$out" && mkdir -p "$out"
hz=${HZ:-4999} case_=${CASE:-resnet}
unset LD_LIBRARY_PATH
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
pf record -e cpu-clock -F "$hz" -k CLOCK_MONOTONIC -o "$out/perf.data" -- \
  taskset -c "$(cores_of 0)" "$python" benches/paired_cost.py "$case_" --device "${DEVICE:-cuda}" \
  --rounds "${ROUNDS:-12}" --steps "${STEPS:-6}" --variants "${VARIANTS:-modules,history}" --spans \
  >"$out/bench.log" 2>"$out/record.log" || { tail -5 "$out/record.log" "$out/bench.log"; exit 1; }
pf script -i "$out/perf.data" -F comm,pid,tid,time,ip,sym,dso --ns >"$out/script.txt" 2>/dev/null
"$python" benches/paired_profile.py "$out/bench.log" "$out/script.txt" "$hz" \
  --top "${TOP:-30}" --against "${AGAINST:-base}" | tee "$out/profile.md"
[ -z "${OUT:-}" ] || cp "$out/profile.md" "$out/bench.log" "$OUT/"
