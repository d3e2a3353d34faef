"""What `--history`'s whole Python stacks cost per allocation event on the CPU, in instructions
and (simulated) cache misses rather than time: run under callgrind by benches/counted.sh, it runs
the same steps under `memprof.profile(step)` (`-f step`) and under
`memprof.profile(step, history=FILE)`, each mode's steps between benches/counted.c's marks.
A step calls down DEPTH frames and there allocates 100 tensors of 1 KiB and frees them: 200
events, each of which --history records with the thread's whole stack (DEPTH + 5 frames), at
two depths, so the rows show the cost per event and how it grows with the stack. Beside them,
what torch's own history pays for a Python stack at each event on CUDA (`context="all"`), at the
same depths: `CapturedTraceback::gather` called as torch's `gather_traceback(python=True)`, less
the same call gathering nothing (its binding's cost), with the GIL already held. On CUDA the
allocator calls it with the GIL released by the op, so it takes the GIL first: this is its floor.

    benches/history_instructions.sh [STEPS]     (runs this under callgrind and prints the table)

Each mode's session runs 3 steps before its counted ones (the stacks are read and named the
first time; from then on each event looks its stack up); Python's garbage collector is off
while they run and PYTHONHASHSEED=0, as in benches/module_call_instructions.py."""
import os
import sys
import tempfile

import torch

import memprof
from counted import counted

torch.set_num_threads(1)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
TENSORS = 100
EVENTS = 2 * TENSORS


def leaf():
    kept = []
    for _ in range(TENSORS):
        kept.append(torch.empty(256))
    kept.clear()


def gather_leaf(python):
    gather = torch._C._profiler.gather_traceback
    for _ in range(EVENTS):
        gather(python, False, False)


def descend(depth, at_leaf=leaf):
    if depth == 0:
        return at_leaf()
    return descend(depth - 1, at_leaf)


def run(mode, depth, history=None):
    def step():
        descend(depth)

    with memprof.profile(step, device="cpu", history=history):
        counted(mode, step, steps)


def run_gather(mode, depth, python):
    counted(mode, lambda: descend(depth, lambda: gather_leaf(python)), steps)


for depth in (5, 40):
    run("targeted_%d" % depth, depth)
    run("history_%d" % depth, depth, history=os.path.join(tempfile.mkdtemp(), "h.pickle"))
    run_gather("torch_gather_%d" % depth, depth, True)
    run_gather("torch_nothing_%d" % depth, depth, False)
print("NOTE %d steps per mode, %d allocation events a step" % (steps, EVENTS))
for depth in (5, 40):
    # benches/counted.sh's rows: (mode - base) / units.
    print("ROW --history over -f, an event, %d frames history_%d targeted_%d %d"
          % (depth + 5, depth, depth, steps * EVENTS))
for depth in (5, 40):
    print("ROW torch's Python stack, a gather, %d frames torch_gather_%d torch_nothing_%d %d"
          % (depth + 5, depth, depth, steps * EVENTS))
