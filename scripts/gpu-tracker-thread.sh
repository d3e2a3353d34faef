#!/usr/bin/env bash
# The tracker's own thread (src/capture/peak/worker.rs, MEMPROF_TRACKER_THREAD=1, set here for
# every run: REF's core, before it, ignores it) on the GPU machine, in one device call, through
# the wheel: REF's and NEW's builds (dirs as benches/paired_builds.sh takes them: a
# wheel, or a native core with its torch shims), REF twice as the noise floor:
#   1. the same numbers: every module row and the peak site by site, resnet50's step
#      (benches/modules_rows.sh; CASES as it takes them, default resnet);
#   2. DataLoader workers forked while the thread records (scripts/gpu-fork-check.sh);
#   3. the thread runs (the threads' names);
#   4. the cost, paired (benches/paired_builds.sh: CASES, VARIANTS, ROUNDS, REPEATS as it takes
#      them; default resnet50, no flags, --modules and -f --history, 64 rounds a build).
#   run(command="REF=.device/pb-f NEW=.device/pb-w2 scripts/gpu-tracker-thread.sh",
#       carry=[".device/wheel", ".device/pb-f", ".device/pb-w2"])
set -uo pipefail
cd "$(dirname "$0")/.."
export MEMPROF_TRACKER_THREAD=1
status=0
echo "== 1. the same numbers"
CASES=${CASES:-resnet} BUILDS="ref=$REF ref2=$REF new=$NEW" timeout 300 benches/modules_rows.sh ||
  status=1
echo "== 2. forks"
NATIVE=$NEW timeout 200 scripts/gpu-fork-check.sh || status=1
echo "== 3. the thread"
# NEW's build as step 1 installed it.
PYTHONPATH=/tmp/memprof-modules-rows/new/lib /opt/torch/.venv/bin/python -c "
import os, memprof, torch
def names():
    return sorted(open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir('/proc/self/task'))
before = names()
with memprof.profile():
    kept = [torch.empty(1024, device='cuda') for _ in range(300)]
    during = names()
print('threads before memprof.profile():', before)
print('in it:', during)
assert 'memprof-peak' not in before and 'memprof-peak' in during
" || status=1
echo "== 4. the cost"
BUILDS="ref=$REF new=$NEW" CASES=${CASES:-resnet} VARIANTS=${VARIANTS:-none,modules,history} \
  PROCS=${PROCS:-2} ROUNDS=${ROUNDS:-16} REPEATS=${REPEATS:-2} benches/paired_builds.sh || status=1
echo "gpu-tracker-thread: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
