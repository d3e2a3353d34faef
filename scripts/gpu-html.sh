#!/usr/bin/env bash
# Issue 41's GPU check, in one device call: the peak's, categories' and the HTML report's tests
# that need no browser, on cuda:0; the HTML report of examples/gpt2_train.py (no flags, and with
# --modules -f '<module>'), written there into $OUT to open in Chromium here (the GPU machine
# has no browser: tests/browser/page_check.py); then what the always-on timeline costs:
# benches/peak_cost.sh, the build before it (.device/prev) against this one and python3. After
# scripts/build-device.sh (with the build before copied to .device/prev):
#   run(command="scripts/gpu-html.sh", carry=[".device"])
# Two calls where one would pass the device tool's 10 minutes: PART=pages (the tests and pages),
# then PART=cost.
set -uo pipefail
part=${PART:-all}
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/memprof-html}
mkdir -p "$out"
status=0
[ "$part" = cost ] || {
(
  . scripts/device-env.sh
  echo "== peak::, categories::, html::run_writes on cuda:0"
  .device/tests/integration --test-threads 4 peak:: categories:: html::run_writes 2>&1 |
    grep -vE '^test .* \.\.\. ok$|^$'
  exit "${PIPESTATUS[0]}"
) || status=1
(
  . scripts/device-env.sh
  echo "== examples/gpt2_train.py -o gpt2.html"
  .device/memprof run -o "$out/gpt2.html" examples/gpt2_train.py --steps 8 2>&1 | tail -3
  .device/memprof run --modules -f '<module>' -o "$out/gpt2-modules.json" \
    examples/gpt2_train.py --steps 4 2>&1 | tail -3
  ls -l "$out"
) || status=1
}
[ "$part" = pages ] && exit $status
echo "== benches/peak_cost.sh: the timeline's cost (ROUNDS=${ROUNDS:-3})"
BEFORE=.device/prev/memprof BEFORE_LABEL="memprof run, no flags, before the timeline" \
  OUT=/tmp/memprof-timeline-cost benches/peak_cost.sh 2>&1 | grep -v '^round ' || status=1
exit $status
