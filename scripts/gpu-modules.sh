#!/usr/bin/env bash
# Issue 40's GPU check, in one device call: every --modules test (and the schedule's and compiled
# code's, which use module calls) on cuda:0, then what --modules costs on the resnet50 and GPT-2
# steps against python3, no flags and the build before (benches/modules_cost.sh, the wheel's
# path included). After scripts/build-device.sh:
#   run(command="scripts/gpu-modules.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
(
  . scripts/device-env.sh
  echo "== modules::, schedule::, compiled:: on cuda:0"
  # Every line but the passing tests' (a failure's name and message print in full).
  .device/tests/integration --test-threads 4 modules:: schedule:: compiled:: 2>&1 |
    grep -vE '^test .* \.\.\. ok$|^$'
  exit "${PIPESTATUS[0]}"
) || status=1
echo "== benches/modules_cost.sh (WHEEL=1, ROUNDS=${ROUNDS:-3})"
WHEEL=1 benches/modules_cost.sh 2>&1 | grep -v '^round ' || status=1
exit $status
