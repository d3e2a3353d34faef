#!/usr/bin/env bash
# `memprof merge` at scale (issue 51): one real report (fixtures/mlp.py, 200 steps of -f
# train_step, its timeline full), made into N rank reports by benches/synthetic_ranks.py, merged
# ROUNDS times (default 3) as the table and as JSON; prints seconds, peak resident memory
# (/usr/bin/time) and the table's lines per round.
#   benches/merge_scale.sh [N ...]          # default 256 1024 4096, the release build
set -euo pipefail
cd "$(dirname "$0")/.."
memprof=${MEMPROF:-target/release/memprof}
rounds=${ROUNDS:-3}
if [ -x .venv/bin/python ] && [ -z "${VIRTUAL_ENV:-}" ]; then
  export VIRTUAL_ENV=$PWD/.venv PATH=$PWD/.venv/bin:$PATH
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$memprof" --device cpu run -f train_step -o "$work/template.json" fixtures/mlp.py float32 200 >/dev/null 2>&1
echo "template report: $(du -k "$work/template.json" | cut -f1) KiB"
printf 'ranks\tround\tformat\tseconds\tmax_rss_mib\tlines\n'
for n in "${@:-256 1024 4096}"; do
  for n1 in $n; do
    rm -rf "$work/ranks"
    python benches/synthetic_ranks.py "$work/template.json" "$work/ranks" --ranks "$n1" >/dev/null
    for round in $(seq "$rounds"); do
      for format in table json; do
        /usr/bin/time -f '%e %M' -o "$work/time" "$memprof" merge --format "$format" "$work"/ranks/r.*.json >"$work/out"
        read -r seconds kib <"$work/time"
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$n1" "$round" "$format" "$seconds" "$((kib / 1024))" "$(wc -l <"$work/out")"
      done
    done
  done
done
