#!/usr/bin/env bash
# What the always-on peak costs (issue 22), on the GPU machine: memprof with no flags against
# plain python3 on a GPT-2 124M training step (examples/gpt2_train.py: module-level loop, bf16
# autocast, fused AdamW, batch 12 x 1024) and on the resnet50 batch-32 step
# (benches/workloads.py), the variants interleaved, ROUNDS rounds (default 3). BEFORE (default
# .device/memprof-prev, a build without the peak; BEFORE_LABEL names it in the table) runs too,
# as a control of memprof's other costs. CASES="gpt2" or "resnet" runs one of the two. One device call:
#   run(command="benches/peak_cost.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/memprof-peak-cost}
rounds=${ROUNDS:-3}
cases=${CASES:-gpt2 resnet}
before=${BEFORE:-.device/memprof-prev}
after=${AFTER:-.device/memprof}
mkdir -p "$out" && rm -f "$out"/*.txt
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; python3 --version
  for b in "$before" "$after"; do echo "$b: $("$b" --version)"; done; } | tee "$out/machine.txt"
one() { # name, then the command: appends the process's BENCH line to $out/name.txt
  local name=$1; shift
  "$@" >"$out/$name.log" 2>&1 || echo "$name failed: $(tail -3 "$out/$name.log")"
  grep -h '^BENCH' "$out/$name.log" >>"$out/$name.txt"
}
g="examples/gpt2_train.py --steps 12 --bench"
w="benches/workloads.py resnet"
for round in $(seq "$rounds"); do
  echo "round $round"
  if [[ " $cases " == *" gpt2 "* ]]; then
    one gpt2-python python3 $g
    one gpt2-before "$before" run -o "$out/g0.json" $g
    one gpt2-after "$after" run -o "$out/g1.json" $g
  fi
  if [[ " $cases " == *" resnet "* ]]; then
    one resnet-python python3 $w
    one resnet-before "$before" run -o "$out/r0.json" $w
    one resnet-after "$after" run -o "$out/r1.json" $w
  fi
done
python3 benches/rounds_table.py "$out" \
  "gpt2=GPT-2 124M, bf16 autocast, fused AdamW, 12 x 1024;resnet=resnet50, batch 32, SGD" \
  "python=python3;before=${BEFORE_LABEL:-memprof, no peak (before)};after=memprof run, no flags"
for f in "$out"/g1.json "$out"/r1.json; do
  [ -f "$f" ] && python3 -c "import json,sys; p=json.load(open(sys.argv[1])).get('peak'); print(sys.argv[1], 'peak', p and p['allocated_bytes'], 'sites', p and len(p['sites']))" "$f"
done
