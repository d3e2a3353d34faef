#!/usr/bin/env bash
# The whole benchmark and agreement run, in one call on the GPU machine (after
# scripts/build-device.sh here, which also copies the baseline wheels into .device/wheels):
#   run(command="benches/run.sh", carry=[".device"])
# Sections: all, loop, resnet, modules (--modules and --tensors), untargeted, startup, agree,
# collectives (the resnet step with and without --collectives), history (--history against
# torch's own _record_memory_history), memory (benches/memory.sh).
# The pure-Python cases (1, 4) run pinned to one CPU core (less noise); the GPU cases are not
# pinned, since autograd's device thread needs a core of its own. The variants of a case run
# interleaved, ROUNDS times (default 3): a case's time is the median over rounds of each process's median of its
# repeats after warm-up. Raw results and the summary go to $OUT (or /tmp/memprof-bench).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/memprof-bench}
rounds=${ROUNDS:-3}
only=${1:-all}
mkdir -p "$out"
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site
mp=$PWD/.device/memprof
w=benches/workloads.py
pin="taskset -c 3"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; python3 --version; } | tee "$out/machine.txt"

bench() { # name, then the command; appends this round's BENCH line to $out/name.txt
  local name=$1; shift
  case $name in loop-*|untargeted-*) ;; *) pin= ;; esac
  $pin "$@" >"$out/$name.log" 2>&1 || echo "$name failed: $(tail -3 "$out/$name.log")"
  pin="taskset -c 3"
  grep -h '^BENCH' "$out/$name.log" >>"$out/$name.txt"
}
memprof_on() { # name target, then workload args
  local name=$1 target=$2; shift 2
  bench "$name" "$mp" run -f "$target" --format json -o "$out/$name.json" "$w" "$@" --profiler memprof
}
rm -f "$out"/*.txt

for round in $(seq "$rounds"); do
  echo "round $round"
  if [ "$only" = all ] || [ "$only" = loop ]; then
    bench loop-none python3 "$w" loop --n 1000000 --repeats 5
    memprof_on loop-memprof tight loop --n 1000000 --repeats 5
    bench loop-line_profiler python3 "$w" loop --profiler line_profiler --n 1000000 --repeats 5
    [ "$round" = 1 ] && bench loop-memlab python3 "$w" loop --profiler memlab --n 2000 --repeats 3
  fi
  if [ "$only" = all ] || [ "$only" = resnet ]; then
    for case in resnet bottleneck; do
      bench $case-none python3 "$w" $case
      [ "$round" = 1 ] && bench $case-memlab python3 "$w" $case --profiler memlab
    done
    memprof_on resnet-memprof train_step resnet
    memprof_on bottleneck-memprof torchvision.models.resnet:Bottleneck.forward bottleneck
  fi
  if [ "$only" = all ] || [ "$only" = modules ]; then
    bench modules-none python3 "$w" resnet
    bench modules-memprof "$mp" run --modules --format json -o "$out/modules-memprof.json" "$w" resnet
    bench modules-memtracker python3 "$w" resnet --profiler memtracker
    bench tensors-memprof "$mp" run -f train_step --tensors --format json -o "$out/tensors-memprof.json" "$w" resnet
    bench tensors-memreporter python3 "$w" resnet --profiler memreporter
  fi
  if [ "$only" = all ] || [ "$only" = collectives ]; then
    bench collectives-none python3 "$w" resnet
    bench collectives-memprof "$mp" run -f train_step --format json -o "$out/collectives-memprof.json" "$w" resnet
    bench collectives-on "$mp" run -f train_step --collectives --format json -o "$out/collectives-on.json" "$w" resnet
  fi
  if [ "$only" = all ] || [ "$only" = history ]; then
    bench history-none python3 "$w" resnet
    bench history-torch python3 "$w" resnet --profiler torch_history
    bench history-memprof "$mp" run -f train_step --format json -o "$out/history-memprof.json" "$w" resnet
    bench history-on "$mp" run -f train_step --history "$out/history.pickle" --format json \
      -o "$out/history-on.json" "$w" resnet
    # History of 3 chosen calls (after the 5 warm-up steps): the rest runs without stacks.
    bench history-calls "$mp" run -f train_step --warmup 5 --calls 3 --history "$out/history-calls.pickle" \
      --format json -o "$out/history-calls.json" "$w" resnet
  fi
  if [ "$only" = all ] || [ "$only" = untargeted ]; then
    bench untargeted-none python3 "$w" untargeted --repeats 7
    memprof_on untargeted-memprof rare untargeted --repeats 7
    bench untargeted-unwind python3 "$w" untargeted --repeats 7 --monitor-unwind
    bench untargeted-embedded "$mp" run -o "$out/untargeted-embedded.yaml" "$w" untargeted --repeats 7
    [ "$round" = 1 ] && bench untargeted-memlab python3 "$w" untargeted --profiler memlab --repeats 3
  fi
done
# 5. start-up: 7 runs each, alternating, pinned like the rest.
if [ "$only" = all ] || [ "$only" = startup ]; then
$pin python3 - "$mp" "$out/startup.json" <<'PY'
import json, subprocess, sys, time
mp, path = sys.argv[1], sys.argv[2]
res = {"python": [], "memprof": []}
for _ in range(7):
    for name, cmd in [("python", ["python3", "benches/startup.py"]), ("memprof", [mp, "run", "-o", "/tmp/startup.yaml", "benches/startup.py"])]:
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        res[name].append(time.perf_counter() - t)
json.dump(res, open(path, "w"))
print("startup", {k: [round(x, 2) for x in sorted(v)] for k, v in res.items()})
PY
fi
# memprof's own memory over 10^5 and 10^7 traced line events.
if [ "$only" = all ] || [ "$only" = memory ]; then
  MEMPROF=$mp ROUNDS=$rounds benches/memory.sh | tee "$out/memory.tsv"
fi
# Agreement with torch's own numbers, and with pytorch_memlab's per-line peaks.
if [ "$only" = all ] || [ "$only" = agree ]; then
  for kind in resnet gpt2; do
    bench agree-$kind-plain python3 benches/agree.py $kind
    bench agree-$kind-memprof "$mp" run -f train_step --format json -o "$out/agree-$kind.json" benches/agree.py $kind
    bench agree-$kind-memlab python3 benches/agree.py $kind --memlab
  done
fi
python3 benches/summarize.py "$out" "$only" | tee "$out/summary.md"
