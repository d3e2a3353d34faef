#!/usr/bin/env bash
# The pip wheel's speed (issue 26), on any machine, against a venv with the wheel and torch
# installed (scripts/wheel-check.sh leaves one in /tmp/memprof-wheel-check-<torch>/venv; on the
# GPU machine scripts/gpu-wheel-check.sh installs .device/wheel):
#   1. untargeted call-heavy Python (benches/workloads.py untargeted: 200k small calls per repeat,
#      7 repeats per process, pinned to one core) under the venv's python, under the wheel's
#      `memprof run` with nothing targeted, and with a rarely called function targeted
#      (`-f rare`), and python again (the control: its spread is the noise floor): interleaved,
#      ROUNDS rounds (default 9); each round's ratio to python's;
#   2. the pytest plugin left on: a suite of 200 small torch tests, plain and with
#      `--memprof-limit 1GiB` (every test measured), interleaved ROUNDS rounds;
#   3. start-up of the commands that only read files: `memprof show --help` (and merge, diff,
#      plot, stats) through the pip-installed `memprof` command (the wheel's binary itself) and
#      through `python -m memprof`, RUNS runs each (default 21), median.
#   benches/wheel_speed.sh VENV
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(cd "$1" && pwd)
py=$venv/bin/python
memprof=$venv/bin/memprof
rounds=${ROUNDS:-9}
runs=${RUNS:-21}
pin=$(command -v taskset >/dev/null && echo "taskset -c ${CORE:-1}" || true)
out=${OUT:-$(mktemp -d)}/wheel_speed
rm -rf "$out" && mkdir -p "$out"
w=benches/workloads.py
echo "python: $("$py" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
file -L "$py" | cut -c1-120
# The suite for case 2.
suite=$out/suite && mkdir -p "$suite"
"$py" - "$suite" <<'PY'
import sys
body = ["import torch\n"]
for i in range(200):
    body.append(f"\ndef test_{i}():\n    x = torch.ones(256, 256)\n    assert (x @ x).sum() > 0\n")
open(sys.argv[1] + "/test_suite.py", "w").write("".join(body))
PY
suite_time() {  # one pytest run of the suite, as a BENCH line (its wall time)
  (cd "$suite" && "$py" -c '
import subprocess, sys, time
t = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print("BENCH {\"times\": [%f]}" % (time.perf_counter() - t))
' $pin "$py" -m pytest -q -p no:cacheprovider "$@" test_suite.py)
}
for r in $(seq "$rounds"); do
  $pin "$py" "$w" untargeted --n 200000 --repeats 7 | grep '^BENCH' >>"$out/calls-python.txt"
  $pin "$py" "$w" untargeted --n 200000 --repeats 7 | grep '^BENCH' >>"$out/calls-control.txt"
  $pin "$memprof" run -o "$out/r.json" "$w" untargeted --n 200000 --repeats 7 2>/dev/null |
    grep '^BENCH' >>"$out/calls-none.txt"
  $pin "$memprof" run -f rare -o "$out/r.json" "$w" untargeted --n 200000 --repeats 7 2>/dev/null |
    grep '^BENCH' >>"$out/calls-rare.txt"
  if [ "$("$py" -c 'import sys; print(sys.version_info[:2] == (3, 11))')" = True ]; then
    # The control on 3.11: python under a frame-evaluation hook that does nothing, the price
    # CPython 3.11 charges any such hook (memprof's finds targeted frames with one).
    $pin "$py" benches/eval_frame_hook.py "$w" untargeted --n 200000 --repeats 7 |
      grep '^BENCH' >>"$out/calls-hooked.txt"
  fi
  suite_time >>"$out/suite-python.txt"
  suite_time --memprof-limit 1GiB >>"$out/suite-limit.txt"
done
echo
echo "1 and 2: $rounds interleaved rounds"
"$py" benches/rounds_table.py "$out" "calls=untargeted calls (200k per repeat, median of 7)" \
  "python=python;control=python again (the noise floor);none=memprof run, no target;rare=memprof run -f rare;hooked=python under a no-op frame-evaluation hook (3.11)"
"$py" benches/rounds_table.py "$out" "suite=pytest, 200 small torch tests (ms per suite)" \
  "python=plain;limit=--memprof-limit 1GiB (every test measured)" | tail -n +3
echo
echo "3: start-up of the commands that read files, $runs runs each (ms: min / median / max)"
"$py" - "$memprof" "$py" "$runs" <<'PY'
import statistics, subprocess, sys, time
memprof, python, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
print("| command | `memprof` (the command pip installs) | `python -m memprof` |")
print("| --- | --- | --- |")
for command in ("show", "merge", "diff", "plot", "stats"):
    cells = []
    for exe in ([memprof], [python, "-m", "memprof"]):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(exe + [command, "--help"], stdout=subprocess.DEVNULL, check=True)
            times.append((time.perf_counter() - t0) * 1e3)
        cells.append("%.1f / **%.1f** / %.1f" % (min(times), statistics.median(times), max(times)))
    print("| `memprof %s --help` | %s | %s |" % (command, cells[0], cells[1]))
PY
