#!/usr/bin/env bash
# Bounded memory: the peak RSS of `python` and of `memprof run -f step` on benches/long_run.py
# with 10^5 and 10^7 traced line events, in interleaved rounds (ROUNDS, default 3), from
# /usr/bin/time. memprof's own memory is its RSS minus python's for the same run.
#   benches/memory.sh                       # here, with the project's .venv
#   MEMPROF=.device/memprof benches/memory.sh   # on the GPU machine (python from PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
memprof=${MEMPROF:-target/release/memprof}
rounds=${ROUNDS:-3}
if [ -x .venv/bin/python ] && [ -z "${VIRTUAL_ENV:-}" ]; then
  export VIRTUAL_ENV=$PWD/.venv PATH=$PWD/.venv/bin:$PATH
fi
rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1; }
printf 'round\tevents\tpython_max_rss_kib\tmemprof_max_rss_kib\n'
for round in $(seq "$rounds"); do
  for events in 100000 10000000; do
    py=$(rss python benches/long_run.py "$events")
    mp=$(rss "$memprof" --device cpu run -f step benches/long_run.py "$events")
    printf '%s\t%s\t%s\t%s\n' "$round" "$events" "$py" "$mp"
  done
done
