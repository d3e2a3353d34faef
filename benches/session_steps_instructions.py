"""What memprof's work costs step by step through one session, in instructions (callgrind): a
session's first steps against its later ones. Each step of a `memprof.profile()` session (or
`memprof.profile(modules=True)` with `modules`) runs between its own marks (benches/counted.c),
as does one unprofiled step before it, and each row is a step's count over the unprofiled
one's: a fresh session's timeline closes a point at every event at first and merges its points
at each doubling of their width, which the steps where that happens show.

    benches/counted.sh benches/session_steps_instructions.py [STEPS [none|modules]]
        (default 30 none; about 3 minutes here at 30 steps)

The model is benches/module_call_model.py's MLP (181 module calls and 722 allocator events a
step); each step is counted by benches/counted.py's `counted`, none run before it in the session."""
import sys

import torch

import memprof
from counted import counted
from module_call_model import build

torch.set_num_threads(1)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
modules = sys.argv[2:3] == ["modules"]
model, x, _ = build()


def step():
    model(x).sum().backward()


counted("unprofiled", step, 1)
with memprof.profile(modules=modules):
    for i in range(steps):
        counted("s%03d" % i, step, 1, warmup=0)
print("NOTE %s, each step of one session over an unprofiled step"
      % ("--modules" if modules else "no flags"))
for i in range(steps):
    print("ROW step %d s%03d unprofiled 1" % (i + 1, i))
