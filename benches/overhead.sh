#!/usr/bin/env bash
# Issue 8's table on the GPU machine, two binaries side by side: memprof BEFORE and AFTER a
# change (default .device/memprof-before and .device/memprof), against plain python3, with the
# variants of each case interleaved, ROUNDS rounds (default 4). One device call per part:
#   run(command="benches/overhead.sh steady", carry=[".device"])    # cases 1-4, about 9 min
#   run(command="benches/overhead.sh startup", carry=[".device"])   # case 5, about 5 min
#   run(command="benches/overhead.sh modules", carry=[".device"])   # case 4 alone, about 4 min
# (modules also runs python3 with no-op global module hooks, then also no-op saved-tensors
# hooks: benches/module_hooks_floor.py)
# steady: untargeted Python with a rare target and with no target (pinned to one core), the
# resnet50 step with train_step targeted, the resnet50 step under --modules. startup: `import
# torch` + a first CUDA call as whole processes, without and with a target, RUNS runs each.
# benches/overhead_summary.py prints min / median / max per variant and the ratios per round.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:-steady}
out=${OUT:-/tmp/memprof-overhead}
rounds=${ROUNDS:-4}
before=${BEFORE:-.device/memprof-before}
after=${AFTER:-.device/memprof}
mkdir -p "$out"
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
w=benches/workloads.py
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; python3 --version
  for b in "$before" "$after"; do echo "$b: $("$b" --version)"; done; } | tee "$out/machine.txt"

one() { # name, then the command: appends the process's BENCH line to $out/name.txt
  local name=$1; shift
  "$@" >"$out/$name.log" 2>&1 || echo "$name failed: $(tail -3 "$out/$name.log")"
  grep -h '^BENCH' "$out/$name.log" >>"$out/$name.txt"
}

if [ "$part" = modules ]; then
  rm -f "$out"/modules-*.txt
  for round in $(seq "$rounds"); do
    echo "round $round"
    one modules-python python3 "$w" resnet
    one modules-floor python3 benches/module_hooks_floor.py "$w" resnet
    one modules-floorsaved python3 benches/module_hooks_floor.py --saved "$w" resnet
    one modules-before "$before" run --modules -o "$out/m.json" "$w" resnet
    one modules-after "$after" run --modules -o "$out/m.json" "$w" resnet
  done
  part=steady
elif [ "$part" = steady ]; then
  rm -f "$out"/{untargeted,bare,resnet,modules}-*.txt
  pin="taskset -c 3"
  for round in $(seq "$rounds"); do
    echo "round $round"
    one untargeted-python $pin python3 "$w" untargeted --n 200000 --repeats 7
    one untargeted-before $pin "$before" run -f rare -o "$out/u.json" "$w" untargeted --n 200000 --repeats 7
    one untargeted-after $pin "$after" run -f rare -o "$out/u.json" "$w" untargeted --n 200000 --repeats 7
    one bare-python $pin python3 "$w" untargeted --n 200000 --repeats 7
    one bare-before $pin "$before" run -o "$out/b.json" "$w" untargeted --n 200000 --repeats 7
    one bare-after $pin "$after" run -o "$out/b.json" "$w" untargeted --n 200000 --repeats 7
    # The GPU cases are not pinned: autograd's device thread needs a core of its own.
    one resnet-python python3 "$w" resnet
    one resnet-before "$before" run -f train_step -o "$out/r.json" "$w" resnet
    one resnet-after "$after" run -f train_step -o "$out/r.json" "$w" resnet
    one modules-python python3 "$w" resnet
    one modules-before "$before" run --modules -o "$out/m.json" "$w" resnet
    one modules-after "$after" run --modules -o "$out/m.json" "$w" resnet
  done
elif [ "$part" = startup ]; then
  runs=${RUNS:-7}
  taskset -c 3 python3 - "$before" "$after" "$out/startup.json" "$runs" <<'PY'
import json, subprocess, sys, time
before, after, path, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
variants = {
    "python": ["python3", "benches/startup.py"],
    "before": [before, "run", "-o", "/tmp/s.json", "benches/startup.py"],
    "after": [after, "run", "-o", "/tmp/s.json", "benches/startup.py"],
    "before -f": [before, "run", "-f", "nothing_called", "-o", "/tmp/s.json", "benches/startup.py"],
    "after -f": [after, "run", "-f", "nothing_called", "-o", "/tmp/s.json", "benches/startup.py"],
}
res = {k: [] for k in variants}
for _ in range(runs):
    for name, cmd in variants.items():
        t = time.perf_counter()
        subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        res[name].append(time.perf_counter() - t)
json.dump(res, open(path, "w"))
PY
fi
python3 benches/overhead_summary.py "$out" "$part" | tee "$out/summary-$part.md"
