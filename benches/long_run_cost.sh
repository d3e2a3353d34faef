#!/usr/bin/env bash
# What long-run tracking costs (issue 50), on the GPU machine: the GPT-2 124M step
# (examples/gpt2_train.py: bf16 autocast, fused AdamW, 12 x 1024) and the resnet50 batch-32 step
# (benches/workloads.py), each variant's median step per process, interleaved over ROUNDS rounds
# (default 5): python3, python3 again (the control: its spread is the noise floor), memprof with
# no flags (the growth ledgers and the snapshot socket always on), memprof with --live (the view
# drawn once a second in a pseudo-terminal made by `script`), and memprof with a snapshot asked
# every second from beside it. One device call, after scripts/build-device.sh:
#   run(command="benches/long_run_cost.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
out=/tmp/memprof-long-run-cost
results=${OUT:-$out}
rounds=${ROUNDS:-5}
cases=${CASES:-gpt2 resnet}
bin=${MEMPROF:-$PWD/.device/memprof}
mkdir -p "$out" && rm -f "$out"/*.txt
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; python3 --version
  echo "$bin: $("$bin" --version | head -1)"; } | tee "$out/machine.txt"
one() { # name, then the command: appends the process's BENCH line to $out/name.txt (the JSON
  # alone: under --live the line comes through the view's terminal, among its drawing)
  local name=$1; shift
  "$@" >"$out/$name.log" 2>&1 || echo "$name failed: $(tail -3 "$out/$name.log")"
  python3 -c 'import re, sys
m = re.search(r"BENCH (\{[^{}]*\"times\": \[[^\]]*\][^{}]*\})", open(sys.argv[1], errors="replace").read())
print("BENCH " + m.group(1)) if m else None' "$out/$name.log" >>"$out/$name.txt"
}
# --live needs a terminal: `script` gives the run one (150 x 45).
live() { script -qec "stty cols 150 rows 45; $*" /dev/null; }
# A snapshot a second of the run started by "$@" (its PID is the memprof process's).
snapshots() {
  "$@" & local pid=$!
  while kill -0 "$pid" 2>/dev/null; do "$bin" snapshot "$pid" -o "$out/snap.json" >/dev/null 2>&1; sleep 1; done
  wait "$pid"
}
g="examples/gpt2_train.py --steps 20 --bench"
w="benches/workloads.py resnet"
for round in $(seq "$rounds"); do
  echo "round $round"
  for c in $cases; do
    cmd=$g; [ "$c" = resnet ] && cmd=$w
    one "$c-python" python3 $cmd
    one "$c-control" python3 $cmd
    one "$c-noflags" "$bin" run -o "$out/$c.json" $cmd
    one "$c-live" live "$bin" run --live -o "$out/$c-live.json" $cmd
    one "$c-snapshots" snapshots "$bin" run -o "$out/$c-snap.json" $cmd
  done
done
mkdir -p "$results"
python3 benches/rounds_table.py "$out" \
  "gpt2=GPT-2 124M, bf16 autocast, fused AdamW, 12 x 1024;resnet=resnet50, batch 32, SGD" \
  "python=python3;control=python3 again (the noise floor);noflags=memprof run, no flags;live=memprof run --live;snapshots=memprof run, a snapshot every second" \
  | tee "$results/table.md"
for f in "$out"/gpt2.json "$out"/resnet.json; do
  [ -f "$f" ] && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); g=r.get('growth') or {}; print(sys.argv[1], 'steps', g.get('steps'), 'growing', [(s['source'], s['bytes_per_step']) for s in g.get('sites', [])])" "$f"
done
[ -f "$out/snap.json" ] && python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('last snapshot:', r['metadata']['outcome']['status'], 'peak', r['peak']['allocated_bytes'], 'growth steps', (r.get('growth') or {}).get('steps'))" "$out/snap.json"
exit 0
