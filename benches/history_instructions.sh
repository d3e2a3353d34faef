#!/usr/bin/env bash
# benches/history_instructions.py under callgrind (benches/counted.sh): instructions, data reads
# and simulated cache misses per allocation event that `--history`'s whole stacks add over `-f`
# on the CPU, at two depths of stack. MEMPROF_NATIVE=<build>/libmemprof.so picks a build.
#   benches/history_instructions.sh [STEPS]      (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
exec benches/counted.sh benches/history_instructions.py "${1:-20}"
