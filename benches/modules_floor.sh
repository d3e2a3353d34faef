#!/usr/bin/env bash
# Where --modules' time goes on the resnet50 batch-32 step (issue 40), on the GPU machine: plain
# python3, torch's global module hooks doing nothing (benches/module_hooks_floor.py), those and
# a saved-tensors pack/unpack hook doing nothing (--saved), and memprof run --modules, ROUNDS
# rounds (default 3) interleaved; each line the process's median step. One device call:
#   run(command="benches/modules_floor.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/device-env.sh
median() { # the BENCH line's median step, in ms
  sed -n 's/^BENCH //p' | python3 -c 'import sys, json, statistics; print("%.2f" % (1e3 * statistics.median(json.load(sys.stdin)["times"])))'
}
w="benches/workloads.py resnet"
for r in $(seq "${ROUNDS:-3}"); do
  echo "round $r:" \
    "python3 $(python3 $w | median) ms;" \
    "global hooks $(python3 benches/module_hooks_floor.py $w | median) ms;" \
    "global + saved-tensors hooks $(python3 benches/module_hooks_floor.py --saved $w | median) ms;" \
    "memprof --modules $(.device/memprof run --modules -o /tmp/m.json $w 2>/dev/null | median) ms"
done
