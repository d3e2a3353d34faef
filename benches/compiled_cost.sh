#!/usr/bin/env bash
# What memprof costs on compiled training steps (issue 25), on the GPU machine: python3 against
# memprof with no flags, with -f train_step and with --modules, on examples/compiled_step.py (a compiled GPT-2
# 124M step, bf16 autocast, fused AdamW, batch 8 x 1024; a compiled resnet50 step, batch 64), 15
# steps of which the last 12 are timed, on a warm inductor cache (one bare run fills it first),
# the variants interleaved, ROUNDS rounds (default 3). One device call:
#   run(command="benches/compiled_cost.sh", carry=[".device"])
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/memprof-compiled-cost}
rounds=${ROUNDS:-3}
cases=${CASES:-gpt2 resnet50}
memprof=${MEMPROF:-$PWD/.device/memprof}
mkdir -p "$out" && rm -f "$out"/*.txt
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/memprof-compiled-cost-cache}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; python3 --version
  echo "memprof: $("$memprof" --version)"; } | tee "$out/machine.txt"
cd examples
one() { # name, then the command: appends the process's BENCH line to $out/name.txt
  local name=$1; shift
  "$@" >"$out/$name.log" 2>&1 || echo "$name failed: $(tail -3 "$out/$name.log")"
  grep -h '^BENCH' "$out/$name.log" >>"$out/$name.txt"
}
for c in $cases; do python3 compiled_step.py --model "$c" --steps 2 >/dev/null 2>&1; done
for round in $(seq "$rounds"); do
  echo "round $round"
  for c in $cases; do
    s="compiled_step.py --model $c --steps 15 --bench"
    one "$c-python" python3 $s
    one "$c-memprof" "$memprof" run -o "$out/$c.json" $s
    one "$c-memprof-f" "$memprof" run -f train_step -o "$out/$c-f.json" $s
    one "$c-memprof-modules" "$memprof" run --modules -o "$out/$c-modules.json" $s
  done
done
cd ..
python3 benches/rounds_table.py "$out" \
  "gpt2=GPT-2 124M compiled, bf16 autocast, fused AdamW, 8 x 1024;resnet50=resnet50 compiled, batch 64, AdamW" \
  "python=python3;memprof=memprof run (no flags);memprof-f=memprof run -f train_step;memprof-modules=memprof run --modules"
