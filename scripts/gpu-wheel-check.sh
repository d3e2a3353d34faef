#!/usr/bin/env bash
# On the GPU machine, in one device call (after scripts/build-device.sh here, which also builds
# .device/wheel/ with scripts/release.sh): installs torch-memprof by name from that index (the
# cp312 manylinux wheel) into the machine's own venv (Python 3.12, torch 2.11.0+cu130), then runs the installed `memprof` on examples/train.py on cuda:0 with no
# LD_LIBRARY_PATH, no VIRTUAL_ENV and no activation: only the command's full path; then the
# conformance suite through it, on cuda:0, and the integration suite's GPU, peak and -f tests
# with the installed command as the binary under test; then uninstalls it.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=/opt/torch/.venv
wheel=$(ls .device/wheel/torch_memprof-*.whl | head -n 1)
unset LD_LIBRARY_PATH VIRTUAL_ENV
echo "== torch-memprof ($(basename "$wheel")) into $venv, by name"
# The venv was made by uv and has no pip: install with uv if the machine has it, else with the
# system pip pointed at the venv's Python (pip >= 22.3).
if command -v uv >/dev/null; then
  uv pip install --python "$venv/bin/python" --no-index --find-links .device/wheel torch-memprof
else
  /usr/bin/python3 -m pip --python "$venv/bin/python" install --quiet --no-index \
    --find-links .device/wheel --break-system-packages torch-memprof
fi || { echo "gpu-wheel-check: FAILED (install)"; exit 1; }
status=0
env | grep -E '^(LD_LIBRARY_PATH|VIRTUAL_ENV)=' && status=1
echo "== $venv/bin/memprof --version"
"$venv/bin/memprof" --version || status=1
echo "== $venv/bin/memprof run -f train_step examples/train.py --steps 3"
"$venv/bin/memprof" run -f train_step examples/train.py --steps 3 || status=1
echo "== the same as JSON, and through .device/memprof (linked here, LD_LIBRARY_PATH set): same numbers"
"$venv/bin/memprof" run -f train_step --format json -o /tmp/wheel-train.json \
  examples/train.py --steps 3 >/dev/null || status=1
(export LD_LIBRARY_PATH=$venv/lib/python3.12/site-packages/torch/lib VIRTUAL_ENV=$venv
 .device/memprof run -f train_step --format json -o /tmp/linked-train.json examples/train.py --steps 3 >/dev/null) || status=1
"$venv/bin/python" - <<'PY' || status=1
import json
wheel, linked = (json.load(open("/tmp/%s-train.json" % n)) for n in ("wheel", "linked"))
def lines(r):
    f = next(f for f in r["functions"] if f["qualname"] == "train_step")
    return f["calls"], [(l["line"], l.get("hits"), l.get("delta_bytes"), l.get("stats")) for l in f["lines"]]
calls, rows = lines(wheel)
print("torch", wheel["metadata"]["torch_version"], "device", wheel["metadata"]["device"]["name"], "calls", calls)
for row in rows:
    print("  line %s hits %s delta %s %s" % row)
assert wheel["metadata"]["torch_version"].endswith("+cu130"), wheel["metadata"]
assert calls == 3
assert lines(linked) == (calls, rows), "the wheel's numbers differ from the linked binary's"
print("ok   the wheel's report equals the linked binary's, line by line")
PY
echo "== the conformance suite through the installed wheel on cuda:0 (tests/conformance/check.py)"
MEMPROF_TEST_DEVICE=cuda python3 tests/conformance/check.py --jobs 4 --python "$venv/bin/python" \
  --memprof "$venv/bin/memprof" || status=1
echo "== the integration suite's GPU, peak and -f tests through the installed wheel's command"
(. scripts/device-env.sh
 unset LD_LIBRARY_PATH
 MEMPROF_BIN=$venv/bin/memprof .device/tests/integration --test-threads 4 gpu:: peak:: \
   first_hour:: measure::) || status=1
# The machine's venv as it was: the suite's in-process tests register the checkout's pytest
# plugin, which the installed one would register a second time.
if command -v uv >/dev/null; then
  uv pip uninstall --python "$venv/bin/python" torch-memprof
else
  /usr/bin/python3 -m pip --python "$venv/bin/python" uninstall --quiet -y --break-system-packages torch-memprof
fi
echo "gpu-wheel-check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
