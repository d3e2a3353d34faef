# memprof's own memory over a long run (BENCHMARKS.md, "Bounded memory"): `step` is targeted and
# runs 3 traced lines per call; argv[1] is the number of line events (calls = events / 3). Each
# call allocates a CPU tensor, so every line's window also sees allocator reports.
import sys

import torch


def step(i):
    x = torch.empty(1024)
    y = i + x.numel()
    return y


events = int(sys.argv[1])
for i in range(events // 3):
    step(i)
