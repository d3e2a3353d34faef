#!/usr/bin/env bash
# Long runs (issue 50) on the GPU, one device call after scripts/build-device.sh:
#   run(command="scripts/gpu-long-runs.sh", carry=[".device"])
# The integration tests of growth, snapshots and (where tmux is installed) the live view on
# cuda:0 (fixtures/growing_steps.py leaking 128 KiB a step on the GPU); then a snapshot of a
# running GPT-2 124M job (examples/gpt2_train.py) taken mid-run, the job finishing as usual.
# The costs: benches/long_run_cost.sh (a call of its own). TESTS=none skips the tests.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/device-env.sh
status=0
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
tests="${TESTS:-long_runs:: snapshot::}"
if [ "$tests" = none ]; then :; elif command -v tmux >/dev/null; then tests="$tests live::"; else echo "no tmux here: the live view's tests run on the build machine only"; fi
echo "== .device/tests/integration $tests (MEMPROF_TEST_DEVICE=cuda)"
# shellcheck disable=SC2086
[ "$tests" = none ] || .device/tests/integration --test-threads 2 $tests || status=1
echo "== a snapshot of a running GPT-2 124M job (bf16 autocast, fused AdamW, 12 x 1024, 600 steps)"
out=${OUT:-/tmp/long-runs}
mkdir -p "$out"
.device/memprof run -o "$out/gpt2-end.json" examples/gpt2_train.py --steps 600 >"$out/gpt2.log" 2>&1 &
pid=$!
# Asked once the job has run some steps (its first steps compile and warm up).
for _ in $(seq 60); do
  timeout 20 .device/memprof snapshot "$pid" --format json 2>/dev/null | python3 -c 'import json,sys; sys.exit(0 if (json.load(sys.stdin).get("growth") or {}).get("steps", 0) >= 20 else 1)' 2>/dev/null && break
  sleep 1
done
t0=$(date +%s.%N)
timeout 30 .device/memprof snapshot "$pid" -o "$out/gpt2-snapshot.json" || status=1
t1=$(date +%s.%N)
timeout 30 .device/memprof snapshot "$pid" | sed -n '1,12p'
# The job must end on its own (a snapshot that blocked it would show here).
for _ in $(seq 240); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
kill -0 "$pid" 2>/dev/null && { echo "FAIL: the job has not ended 4 minutes after the snapshots"; kill "$pid"; status=1; }
wait "$pid" || { status=1; tail -5 "$out/gpt2.log"; }
python3 - "$out" "$t0" "$t1" <<'PY' || status=1
import json, sys
out, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
snap = json.load(open(out + "/gpt2-snapshot.json"))
end = json.load(open(out + "/gpt2-end.json"))
g = snap.get("growth") or {}
ok = (snap["metadata"]["outcome"]["status"] == "running" and snap["peak"]["allocated_bytes"] > 0
      and end["metadata"]["outcome"]["status"] == "completed" and (g.get("steps") or 0) > 1)
print("%s   snapshot in %.2f s: outcome %s, peak %d B, %d timeline points, growth after %s steps: %s; "
      "the job then completed (%s), its own peak %d B" % (
          "ok" if ok else "FAIL", t1 - t0, snap["metadata"]["outcome"]["status"],
          snap["peak"]["allocated_bytes"], len(snap["timeline"]["allocations"]), g.get("steps"),
          [(s["source"], s["bytes_per_step"]) for s in g.get("sites", [])] or "nothing grows",
          end["metadata"]["outcome"]["status"], end["peak"]["allocated_bytes"]))
sys.exit(0 if ok else 1)
PY
echo "gpu-long-runs: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
