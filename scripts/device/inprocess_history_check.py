"""In-process `--history` on CUDA (the wheel's `memprof.profile(history=...)`): two sessions
each write their own file, the second without the first's events, the allocations of each
session's steps at their sizes; with warmup= and calls=, the measured calls' allocations only
(recording stops when the last one ends). Prints HISTORY OK, or what
failed. On the GPU machine: `. benches/device_wheel.sh; $device_venv/bin/python
scripts/device/inprocess_history_check.py`."""
import os
import pickle
import sys
import tempfile

import torch

import memprof


def step(n):
    a = torch.ones(n, 1024, device="cuda")   # n * 4 KiB
    b = a * 2
    return float(b.sum())


folder = tempfile.mkdtemp()
problems = []
torch.ones(1, device="cuda")
for name, n in (("first", 1024), ("second", 2048)):
    path = os.path.join(folder, name + ".pickle")
    with memprof.profile(step, history=path) as report:
        for _ in range(3):
            step(n)
    snapshot = pickle.load(open(path, "rb"))
    allocs = [e for e in snapshot["device_traces"][0] if e["action"] == "alloc"]
    big = sorted(e["size"] for e in allocs if e["size"] >= 1 << 20)
    print(name, "events", snapshot["memprof"]["events"], "allocations of 1 MiB or more", big)
    if big != [n * 4096] * 6:
        problems.append("%s: %s" % (name, big))
    if report.to_dict()["history"]["events"] != snapshot["memprof"]["events"]:
        problems.append("%s: the report's count" % name)
# calls=: the history ends with the last measured call (calls 2 and 3 of five).
path = os.path.join(folder, "scheduled.pickle")
with memprof.profile(step, history=path, warmup=1, calls=2):
    for n in (256, 512, 768, 1024, 1280):
        step(n)
snapshot = pickle.load(open(path, "rb"))
big = sorted(e["size"] for e in snapshot["device_traces"][0]
             if e["action"] == "alloc" and e["size"] >= 1 << 20)
print("scheduled", "allocations of 1 MiB or more", big)
if big != [512 * 4096] * 2 + [768 * 4096] * 2:
    problems.append("scheduled: %s" % big)
print("HISTORY OK" if not problems else "HISTORY FAILED: " + "; ".join(problems))
sys.exit(1 if problems else 0)
