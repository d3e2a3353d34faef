#!/usr/bin/env bash
# benches/module_call_instructions.py under callgrind (benches/counted.sh): instructions, data
# reads and simulated cache misses per module call that `--modules` adds over no flags, and per
# step that no flags adds over unprofiled. MEMPROF_NATIVE=<build>/libmemprof.so picks a build.
#   benches/module_call_instructions.sh [STEPS [gpt2|resnet]]   (default 10; about 4 minutes here;
#   resnet: about 25 minutes at 2 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
exec benches/counted.sh benches/module_call_instructions.py "${1:-10}" "${@:2}"
