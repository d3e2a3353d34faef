"""What `--modules` costs per module call, measured inside one process: blocks of steps under
`memprof.profile(modules=True)`, under `memprof.profile()` (no flags) and unprofiled alternate in
a shuffled order each round, and the difference between the first two per round, divided by the
model's module calls, is what `--modules`' own work costs a call (its wrapper, windows, saved
count and gradient hooks), in microseconds. The model is 60 blocks of Linear(16, 16) + ReLU
(181 module calls a step, tiny compute), so that memprof's share is large and its changes show
on a machine without a GPU, where benches/module_calls.py (across processes) cannot resolve
them.

    python benches/module_call_cost.py [--rounds 10] [--steps 30] [--mode full|forward|nograd]
        [--sweep MiB] [--floor]

--mode: forward and backward (full), forward with grad (forward: the hooks are registered, no
backward runs) or under torch.no_grad() (nograd: the windows and the tracker alone). --sweep N:
each block also writes N MiB between its module calls (a stand-in for cuDNN's, cuBLAS's and
the CUDA driver's work on a GPU step, which evicts memprof's data from the caches between calls:
on this build machine a call cost 0.97 µs without and 1.23-1.79 µs with 4-8 MiB). --floor adds
a block with torch's Module._call_impl wrapped by a Python function that only calls it (what
any per-call wrapper costs). Each block's first step is not counted. With MEMPROF_NATIVE naming a
build's libmemprof.so (target/release, with its torch_shims/ beside it), two builds compare
process against process."""
import argparse
import os
import random
import statistics
import sys
import time

import torch

import memprof
from module_call_model import build

parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=10)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--mode", choices=("full", "forward", "nograd"), default="full")
parser.add_argument("--sweep", type=float, default=0.0)
parser.add_argument("--floor", action="store_true")
args = parser.parse_args()

torch.set_num_threads(1)
junk = torch.zeros(int(args.sweep * 2**20 / 4)) if args.sweep > 0 else None
model, x, calls = build(junk)


def step():
    model.zero_grad(set_to_none=True)
    if args.mode == "nograd":
        with torch.no_grad():
            model(x)
    elif args.mode == "forward":
        model(x).sum()
    else:
        model(x).sum().backward()


def block(variant):
    """The median step of one block of `variant`."""
    restore = None
    if variant == "wrapper":
        original = torch.nn.Module._call_impl

        def _call_impl(self, *a, **k):
            return original(self, *a, **k)

        torch.nn.Module._call_impl, restore = _call_impl, original
    session = {"none": memprof.profile, "modules": lambda: memprof.profile(modules=True)}.get(
        variant)
    session = session() if session else None
    if session:
        session.__enter__()
    step()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    if session:
        session.__exit__(None, None, None)
    if restore:
        torch.nn.Module._call_impl = restore
    return statistics.median(times)


for _ in range(3):
    step()
variants = ["base", "none", "modules"] + (["wrapper"] if args.floor else [])
times = {v: [] for v in variants}
for _ in range(args.rounds):
    order = variants[:]
    random.shuffle(order)
    for v in order:
        times[v].append(block(v))
us = lambda seconds: seconds * 1e6 / calls  # noqa: E731
base = statistics.median(times["base"])
print(f"{calls} module calls a step, mode {args.mode}, sweep {args.sweep} MiB, "
      f"{args.rounds} rounds of {args.steps} steps; unprofiled step {base * 1e3:.3f} ms")
for v in variants[1:]:
    print(f"  {v:8s} +{us(statistics.median(times[v]) - base):.3f} us a call over unprofiled")
per_round = sorted(us(m - n) for m, n in zip(times["modules"], times["none"]))
print(f"BENCH --modules over no flags: {statistics.median(per_round):.3f} us a module call "
      f"(min {per_round[0]:.3f}, max {per_round[-1]:.3f})", file=sys.stdout)
