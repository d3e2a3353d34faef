#!/usr/bin/env bash
# The peak by what it is and the whole device (issue 38), in one device call (after
# scripts/build-device.sh here): resnet50 batch 32 and GPT-2 124M bf16 run under memprof with no
# flags, torch's own memory profiler on the same steps, and the two compared with the device
# split against the driver's count (scripts/categories_check.py), then the GPT-2 table.
#   run(command="scripts/gpu-categories.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/device-env.sh
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
status=0
python3 scripts/categories_check.py --context-probe | tee "$out/context.json"
for case in ${CASES:-resnet gpt2}; do
  echo "== $case: memprof run (no flags)"
  CATEGORIES_DRIVER="$out/$case-driver.json" "$MEMPROF_BIN" run -o "$out/$case.json" \
    scripts/categories_check.py "$case" --steps 4 >"$out/$case.log" 2>&1 || { status=1; tail -20 "$out/$case.log"; }
  echo "== $case: torch.profiler (profile_memory=True), two steps after three"
  python3 scripts/categories_check.py "$case" --torch-profiler "$out/$case-torch.json" >"$out/$case-torch.log" 2>&1 \
    || { status=1; tail -20 "$out/$case-torch.log"; }
  python3 scripts/categories_check.py "$case" --compare "$out/$case.json" "$out/$case-torch.json" \
    "$out/$case-driver.json" "$out/context.json" || status=1
done
echo "== the README's first example: memprof run examples/gpt2_train.py"
"$MEMPROF_BIN" run examples/gpt2_train.py 2>&1 | tee "$out/gpt2_demo.txt" | head -40
exit $status
