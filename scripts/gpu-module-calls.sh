#!/usr/bin/env bash
# A change to `--modules`' per-call work on the GPU machine, in one device call, through the
# wheel: REF's and NEW's builds (dirs as benches/paired_builds.sh takes them: a wheel, or a
# native core with its torch shims), REF twice as the noise floor:
#   1. the same numbers: every module row and the peak site by site, on the resnet50 and GPT-2
#      steps (benches/modules_rows.sh; ROWS_CASES, default both);
#   2. the cost, paired (benches/paired_builds.sh: CASES, VARIANTS, PROCS, ROUNDS, REPEATS as it
#      takes them; default resnet50, no flags, --modules and -f --history, 48 rounds a build).
#   run(command="REF=.device/pb-t NEW=.device/pb-m scripts/gpu-module-calls.sh",
#       carry=[".device/wheel", ".device/pb-t", ".device/pb-m"])
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
echo "== 1. the same numbers"
CASES=${ROWS_CASES:-resnet gpt2} BUILDS="ref=$REF ref2=$REF new=$NEW" timeout 320 \
  benches/modules_rows.sh || status=1
echo "== 2. the cost"
BUILDS="ref=$REF new=$NEW" CASES=${CASES:-resnet} VARIANTS=${VARIANTS:-none,modules,history} \
  PROCS=${PROCS:-2} ROUNDS=${ROUNDS:-12} REPEATS=${REPEATS:-2} benches/paired_builds.sh || status=1
echo "gpu-module-calls: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
