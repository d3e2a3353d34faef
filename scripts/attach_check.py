"""memprof attach on a real Python 3.14, inside the root scripts/attach-check.sh makes: each check
prints `ok` or `FAIL` and what it saw; exit 1 if any failed.

    python attach_check.py FIXTURES_DIR

The program is fixtures/growing_steps.py (an MLP whose steps each keep a 128 KiB slice): its
output under attach must be its output without, and the report must have what it measured from
the attach on (the slice growing at 131072 bytes a step, what was live before as its own row).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

FIX = sys.argv[1]
BIN = os.path.dirname(sys.executable)
MEMPROF = os.path.join(BIN, "memprof")
failed = []


def check(name, ok, detail=""):
    print(("ok     " if ok else "FAIL   ") + name + ("" if ok else ": " + str(detail)[-1500:]),
          flush=True)
    if not ok:
        failed.append(name)


def program(*args, python=sys.executable, env=None):
    """growing_steps.py ARGS, started; returns it once it has printed its first step."""
    p = subprocess.Popen([python, os.path.join(FIX, "growing_steps.py"), *args], cwd=FIX,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = p.stdout.readline()
    return p, first


def finish(p, first):
    out, err = p.communicate(timeout=300)
    return p.returncode, first + out, err


def attach(pid, *args, **kw):
    return subprocess.run([MEMPROF, "attach", str(pid), *args], capture_output=True, text=True,
                          timeout=300, **kw)


STEPS = ["leak", "60", "--say", "--pace", "0.05"]
plain = subprocess.run([sys.executable, "growing_steps.py", *STEPS], cwd=FIX, capture_output=True,
                       text=True, timeout=300)
check("the program alone", plain.returncode == 0, plain.stderr)

# 1. --duration: the report of what ran from the attach on; the program as without.
with tempfile.TemporaryDirectory() as d:
    report = os.path.join(d, "r.json")
    p, first = program(*STEPS)
    r = attach(p.pid, "--duration", "3", "-o", report)
    code, out, err = finish(p, first)
    check("attach --duration 3 -o r.json: exit 0", r.returncode == 0, r.stderr)
    check("the program's output and exit as without memprof", (code, out, err) ==
          (0, plain.stdout, plain.stderr), (code, out[-300:], err[-800:]))
    check("memprof says it attached", "memprof: attached to process %d" % p.pid in r.stderr,
          r.stderr)
    try:
        rep = json.load(open(report))
    except Exception as e:  # noqa: BLE001
        rep = {}
        check("the report", False, e)
    sites = (rep.get("growth") or {}).get("sites", [])
    check("the kept slice grows at 131072 bytes a step",
          [(s["source"], s["bytes_per_step"]) for s in sites] ==
          [("kept.append(out[:32].detach().clone())", 131072)], sites)
    meta = rep.get("metadata", {})
    check("the report says memprof attach measured it",
          meta.get("command_line") == ["memprof", "attach", "--duration", "3", str(p.pid)],
          meta.get("command_line"))
    check("the report's Python is 3.14", meta.get("python_version", "").startswith("3.14"),
          meta.get("python_version"))
    check("what was live before the attach is its own row (the model, Adam's state)",
          (rep.get("peak") or {}).get("unseen_bytes", 0) > 0, rep.get("peak"))

# The table's next command is an attach's, with this PID.
p, first = program(*STEPS)
r = attach(p.pid, "--duration", "2")
finish(p, first)
check("the table suggests `memprof attach -f ... PID` for the lines",
      r.returncode == 0 and "line by line, next: memprof attach -f step %d" % p.pid in r.stdout,
      r.stdout[-1500:])

# 2. -f and --modules; Ctrl-C detaches; a snapshot meanwhile; a second attach refused.
p, first = program("calls", "60", "--say", "--pace", "0.05")
a = subprocess.Popen([MEMPROF, "attach", "-f", "step", "--modules", str(p.pid)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 60
snap = None
while time.time() < deadline:
    snap = subprocess.run([MEMPROF, "snapshot", str(p.pid), "--format", "json"],
                          capture_output=True, text=True)
    if snap.returncode == 0:
        break
    time.sleep(0.2)
check("memprof snapshot of the attached program", snap is not None and snap.returncode == 0
      and json.loads(snap.stdout)["metadata"]["outcome"]["status"] == "running",
      snap and snap.stderr)
second = attach(p.pid)
check("a second attach is refused, naming snapshot and live",
      second.returncode == 2 and "measured by memprof already" in second.stderr, second.stderr)
time.sleep(1)
a.send_signal(signal.SIGINT)
out, err = a.communicate(timeout=120)
check("Ctrl-C detaches and prints the report (exit 0)", a.returncode == 0, err)
check("the line table of step", "Function: step at line" in out and "out = model(x)" in out,
      out[:1500])
check("the modules table", "Sequential (root)" in out and "Linear" in out, out[-1500:])
# 3. Attached again after the detach: a second session in the same process.
r = attach(p.pid, "--duration", "0.5", "--format", "json")
check("attached again after a detach", r.returncode == 0 and json.loads(r.stdout or "{}").get(
    "peak") is not None, r.stderr)
code, out, err = finish(p, first)
check("the program ran on to its end, its output its own", code == 0 and err == "" and
      out.splitlines()[-1].startswith("kept 60 last loss"), (code, err, out[-200:]))

# 4. The program ends while attached: its report still comes.
p, first = program("leak", "10", "--say", "--pace", "0.1")
r = attach(p.pid, "--format", "json")
code, out, err = finish(p, first)
check("the program's end while attached: the report, exit 0",
      r.returncode == 0 and "peak" in json.loads(r.stdout or "{}"), r.stderr)
check("it says the program ended", "the program ended" in r.stderr, r.stderr)
check("the program exits 0 with its output", code == 0 and err == "", err)

# 5. A program that has not imported torch; one whose environment lacks torch-memprof.
p = subprocess.Popen([sys.executable, "-c",
                      "import time\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)"],
                     stdout=subprocess.PIPE, text=True)
p.stdout.readline()
r = attach(p.pid)
check("no torch imported: one message, exit 2",
      r.returncode == 2 and "has not imported torch" in r.stderr, r.stderr)
check("it runs on", p.poll() is None)
p.kill()
p.wait()
with tempfile.TemporaryDirectory() as d:
    # The venv's packages but torch-memprof's, for a python started without its site.
    site = [x for x in sys.path if x.endswith("site-packages")][0]
    for name in os.listdir(site):
        if not name.startswith(("memprof", "torch_memprof")):
            os.symlink(os.path.join(site, name), os.path.join(d, name))
    env = dict(os.environ, PYTHONPATH=d)
    p = subprocess.Popen([sys.executable, "-S", "-c",
                          "import time, torch\nprint('ready', flush=True)\n"
                          "while True: time.sleep(0.05)"],
                         stdout=subprocess.PIPE, text=True, env=env)
    p.stdout.readline()
    r = attach(p.pid)
    check("no torch-memprof in the program's environment: the fix, exit 2",
          r.returncode == 2 and "No module named 'memprof'" in r.stderr
          and "pip install torch-memprof" in r.stderr, r.stderr)
    p.kill()
    p.wait()

print("attach-check: %s" % ("PASSED" if not failed else "FAILED: " + ", ".join(failed)))
sys.exit(1 if failed else 0)
