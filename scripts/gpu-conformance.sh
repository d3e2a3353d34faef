#!/usr/bin/env bash
# Issue 48's GPU check, in one device call (after scripts/build-device.sh here):
#   run(command="scripts/gpu-conformance.sh", carry=[".device"])
# The differential conformance suite with the device's memprof and python on cuda:0 (DataLoader
# workers move their batches to cuda:0, torch.multiprocessing.spawn's children allocate there;
# Hydra and the HuggingFace Trainer need packages the GPU machine lacks, and are named as not
# run), then the integration tests of running as python, signals and child processes on cuda:0,
# then the whole integration suite (FULL=0 leaves it out).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/device-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
echo "== conformance on cuda:0: tests/conformance/check.py"
python3 tests/conformance/check.py --jobs 4 --python /opt/torch/.venv/bin/python \
  --memprof "$MEMPROF_BIN" || status=1
echo "== conformance::, run_as_python::, signals::, second_hour::, running:: on cuda:0"
.device/tests/integration --test-threads 4 run_as_python:: signals:: second_hour:: running:: 2>&1 |
  grep -vE '^test .* \.\.\. ok$|^$'
[ "${PIPESTATUS[0]}" = 0 ] || status=1
if [ "${FULL:-1}" = 1 ]; then
  echo "== the whole integration suite on cuda:0 (conformance:: ran above; html:: needs a browser)"
  .device/tests/integration --test-threads 4 --skip conformance:: 2>&1 |
    grep -vE '^test .* \.\.\. ok$|^$'
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
echo "gpu-conformance: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
