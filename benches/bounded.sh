#!/usr/bin/env bash
# Bounded over days (issue 50): memprof's peak resident memory and the report's size for runs of
# 10^6, 10^7 and 10^8 CPU allocations (benches/bounded.py), against python3's own; /usr/bin/time
# for RSS and seconds. The release build:  benches/bounded.sh [COUNTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
memprof=${MEMPROF:-target/release/memprof}
if [ -x .venv/bin/python ] && [ -z "${VIRTUAL_ENV:-}" ]; then
  export VIRTUAL_ENV=$PWD/.venv PATH=$PWD/.venv/bin:$PATH
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'allocations\tpython_rss_mib\tpython_s\tmemprof_rss_mib\tmemprof_s\treport_kib\ttimeline_points\tgrowth_steps\n'
for n in "${@:-1000000 10000000 100000000}"; do
  /usr/bin/time -f '%M %e' -o "$work/py" python benches/bounded.py "$n" >/dev/null
  /usr/bin/time -f '%M %e' -o "$work/mp" "$memprof" --device cpu run -o "$work/r.json" benches/bounded.py "$n" >/dev/null 2>&1
  read -r pr ps <"$work/py"; read -r mr ms <"$work/mp"
  facts=$(python -c "import json,sys; r=json.load(open(sys.argv[1])); print(len(r['timeline']['allocations']), (r.get('growth') or {}).get('steps'))" "$work/r.json")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$((pr / 1024))" "$ps" "$((mr / 1024))" "$ms" "$(( $(stat -c %s "$work/r.json") / 1024 ))" "$(echo "$facts" | tr ' ' '\t')"
done
