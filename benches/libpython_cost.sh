#!/usr/bin/env bash
# Where memprof-with-no-target's cost on pure Python comes from (GPU machine, after
# scripts/build-device.sh, which builds .device/diag/dynpython from benches/dynpython.c):
#   run(command="benches/libpython_cost.sh", carry=[".device"])
# The static python3.12, the same interpreter through the shared libpython3.12.so.1.0 (dynpython,
# what the wheel's memprof embeds), memprof with no target linked to that shared library
# (.device/memprof-shared) and linked statically (.device/memprof, build/libpython.rs),
# interleaved ROUNDS times (default 5), pinned.
cd "$(dirname "$0")/.."
export VIRTUAL_ENV=/opt/torch/.venv PATH=/opt/torch/.venv/bin:$PATH
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/torch/lib
out=${OUT:-/tmp/diag}; mkdir -p "$out"; rm -f "$out"/*.txt
file -L "$(command -v python3)" | cut -c1-150
for b in .device/memprof-shared .device/memprof; do echo "$b: $("$b" --version | tail -n 1)"; done
for r in $(seq "${ROUNDS:-5}"); do
  for v in python3 dynpython memprof-shared memprof; do
    case $v in
      python3) cmd=(python3) ;;
      dynpython) cmd=(env PYTHONHOME=/usr PYTHONPATH=/opt/torch/.venv/lib/python3.12/site-packages .device/diag/dynpython) ;;
      memprof-shared) cmd=(.device/memprof-shared run -o "$out/m.json") ;;
      memprof) cmd=(.device/memprof run -o "$out/m.json") ;;
    esac
    taskset -c 3 "${cmd[@]}" benches/workloads.py untargeted --n 200000 --repeats 7 2>/dev/null | grep '^BENCH' >>"$out/$v.txt"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
base = None
for v in ("python3", "dynpython", "memprof-shared", "memprof"):
    m = [statistics.median(json.loads(l.split("BENCH ", 1)[1])["times"]) * 1e3 for l in open(f"{out}/{v}.txt")]
    base = base or m
    r = sorted(a / b for a, b in zip(m, base))
    print(f"{v:14s} {min(m):6.2f} / {statistics.median(m):6.2f} / {max(m):6.2f} ms   ratio per round {statistics.median(r):.3f}x ({r[0]:.3f}x, {r[-1]:.3f}x)")
PY
