"""Where memprof's start-up time goes: whole processes, interleaved, ROUNDS (default 7) rounds.

    python3 benches/startup_phases.py MEMPROF_BINARY [cuda|cpu]

Each phase is a pair, python3 and memprof running the same script: an empty script (the
interpreter and, for memprof, loading libtorch), `import torch`, and `import torch` plus a first
device call (benches/startup.py's work). `memprof --version` alone is the cost of loading the
binary and libtorch without Python. Prints min and median seconds per variant, and memprof's
extra time per phase.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

mp = sys.argv[1]
device = sys.argv[2] if len(sys.argv) > 2 else "cuda"
rounds = int(os.environ.get("ROUNDS", "7"))
tmp = tempfile.mkdtemp()
scripts = {
    "empty": "pass\n",
    "import_torch": "import torch\n",
    "first_call": f"import torch\ntorch.zeros(1, device='{device}')\n",
}
paths = {}
for name, text in scripts.items():
    paths[name] = os.path.join(tmp, name + ".py")
    with open(paths[name], "w") as f:
        f.write(text)
report = os.path.join(tmp, "r.yaml")
variants = [("memprof --version", [mp, "--version"])]
for name, path in paths.items():
    variants.append((f"python3 {name}", [sys.executable, path]))
    variants.append((f"memprof {name}", [mp, "run", "-o", report, path]))
    variants.append((f"memprof -f x {name}", [mp, "run", "-f", "x", "-o", report, path]))
times = {name: [] for name, _ in variants}
for _ in range(rounds):
    for name, cmd in variants:
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[name].append(time.perf_counter() - t)
print(f"{'variant':<28} {'min':>7} {'median':>7} {'max':>7}  (s, {rounds} interleaved rounds)")
for name, ts in times.items():
    print(f"{name:<28} {min(ts):7.3f} {statistics.median(ts):7.3f} {max(ts):7.3f}")
for name in scripts:
    base = statistics.median(times[f"python3 {name}"])
    for v in (f"memprof {name}", f"memprof -f x {name}"):
        print(f"{v:<28} +{statistics.median(times[v]) - base:.3f} s over python3 (medians)")
