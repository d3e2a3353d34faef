#!/usr/bin/env bash
# Whether a change to how `--modules` measures, or how the tracker records, keeps its numbers,
# through the wheel: each build in BUILDS ("label=dir ...", each dir holding one build's wheel,
# or only its native core as benches/paired_builds.sh takes them; the first is the reference)
# installed apart and run as `python -m memprof run --modules` on the resnet50 and GPT-2 steps
# (CASES, default both), then every module row (benches/modules_rows.py) and the peak, site by
# site (benches/peak_rows.py), of each later build compared with the first's. On the GPU machine:
#   run(command="BUILDS='before=.device/wheel-old after=.device/wheel' benches/modules_rows.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
out=/tmp/memprof-modules-rows
rm -rf "$out" && mkdir -p "$out"
cases=${CASES:-resnet gpt2}
. benches/device_wheel.sh
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
unset LD_LIBRARY_PATH VIRTUAL_ENV
status=0 first=
for b in $BUILDS; do
  label=${b%%=*} dir=${b#*=}
  install_build "$dir" "$out/$label/lib" || exit 1
  for c in $cases; do
    case $c in
      resnet) workload=(benches/workloads.py resnet) ;;
      gpt2) workload=(examples/gpt2_train.py --steps 8) ;;
    esac
    PYTHONPATH=$out/$label/lib "$device_venv/bin/python" -m memprof run --modules \
      -o "$out/$label-$c.json" "${workload[@]}" >"$out/$label-$c.log" 2>&1 ||
      { echo "$label $c failed: $(tail -3 "$out/$label-$c.log")"; status=1; }
    if [ -n "$first" ]; then
      "$device_venv/bin/python" benches/modules_rows.py "$c ($first -> $label)" \
        "$out/$first-$c.json" "$out/$label-$c.json" || status=1
      "$device_venv/bin/python" benches/peak_rows.py "$c ($first -> $label)" \
        "$out/$first-$c.json" "$out/$label-$c.json" || status=1
    fi
  done
  first=${first:-$label}
done
exit $status
