#!/usr/bin/env bash
# Issue 26 on the GPU machine, in one device call (after scripts/build-device.sh here, which packs
# .device/wheel/ and pytest's wheels into .device/pywheels/):
#   run(command="scripts/gpu-inprocess-check.sh", carry=[".device"])
# Installs the wheel (and pytest) into the machine's venv, then, through the installed package
# only: 1. the pytest plugin fails a test over a CUDA limit and names the line, with exact
# bytes; 2. memprof.profile's report of a CUDA step equals `memprof run -f step`'s, line by
# line; 3. benches/wheel_speed.sh: the untargeted call-heavy benchmark through the pip-installed
# `memprof run` against python3, the plugin left on in a suite, and the read-only commands'
# start-up.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=/opt/torch/.venv
wheel=$(ls .device/wheel/torch_memprof-*.whl | head -n 1)
unset LD_LIBRARY_PATH VIRTUAL_ENV
export PATH=$venv/bin:$PATH
. scripts/device/venv-install.sh
install() { venv_install "$venv/bin/python" "$@"; }
echo "== $wheel and pytest into $venv"
install --no-deps "$wheel" || { echo "gpu-inprocess-check: FAILED (install)"; exit 1; }
install --no-index --find-links .device/pywheels pytest || { echo "gpu-inprocess-check: FAILED (pytest)"; exit 1; }
status=0
out=${OUT:-/tmp}/inprocess && rm -rf "$out" && mkdir -p "$out"

echo "== 1. the pytest plugin on cuda:0"
cat >"$out/test_cuda_limit.py" <<'PY'
import pytest, torch

MiB = 1024 * 1024

@pytest.mark.limit_device_memory("64 MiB")
def test_over():
    weights = torch.ones(16 * MiB, device="cuda")           # 64 MiB
    act = torch.ones(4 * MiB, device="cuda")                # 16 MiB: 80 MiB live
    torch.cuda.synchronize()

@pytest.mark.limit_device_memory("64 MiB")
def test_within():
    x = torch.ones(8 * MiB, device="cuda")                  # 32 MiB
PY
(cd "$out" && python -m pytest -q -p no:cacheprovider test_cuda_limit.py) >"$out/pytest.txt" 2>&1
cat "$out/pytest.txt"
grep -q "1 failed, 1 passed" "$out/pytest.txt" &&
  grep -q "test_over: device peak 80.00 MiB (83886080 B) on cuda:0 is over its limit of 64.00 MiB" "$out/pytest.txt" &&
  grep -q "test_cuda_limit.py:8 test_over: act = torch.ones(4 \* MiB, device=\"cuda\")" "$out/pytest.txt" &&
  echo "ok   the plugin fails the CUDA test over its limit and names the line" ||
  { echo "FAIL the plugin on cuda:0"; status=1; }

echo "== 2. memprof.profile against memprof run on cuda:0"
(cd fixtures && MEMPROF_TEST_DEVICE=cuda python inprocess_step.py --api "$out/api.json" &&
  MEMPROF_TEST_DEVICE=cuda memprof run -f step -o "$out/cli.json" inprocess_step.py) || status=1
python - "$out" <<'PY' || status=1
import json, sys
out = sys.argv[1]
def lines(name):
    r = json.load(open(f"{out}/{name}.json"))
    f = next(f for f in r["functions"] if f["qualname"] == "step")
    return r["metadata"]["device"], [(l["line"], l.get("hits"), l.get("delta_bytes"),
        {k: v for k, v in l.get("stats", {}).items() if not k.startswith("host_")}) for l in f["lines"]]
(dev_a, a), (dev_c, c) = lines("api"), lines("cli")
print("device", dev_a)
for row in a:
    print("  line %s hits %s delta %s %s" % row)
assert dev_a["type"] == "cuda", dev_a
assert a == c, ("differ", a, c)
print("ok   memprof.profile's report equals memprof run's, line by line, on cuda:0")
PY

echo "== 3. benches/wheel_speed.sh"
ROUNDS=${ROUNDS:-7} CORE=3 OUT=$out benches/wheel_speed.sh "$venv" || status=1
echo "gpu-inprocess-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
