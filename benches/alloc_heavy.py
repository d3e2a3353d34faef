"""An allocation-heavy step for benches/trace_cost.sh: each step allocates `--tensors` tensors of
assorted sizes, keeps half a while, and frees them all. Prints one BENCH line (step times)."""
import argparse
import json
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--device", default="cpu")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--tensors", type=int, default=200)
args = p.parse_args()


def step(n, device):
    kept = []
    for i in range(n):
        t = torch.empty((i % 17 + 1) * 4096, dtype=torch.uint8, device=device)
        if i % 2:
            kept.append(t)
    del kept


for _ in range(3):
    step(args.tensors, args.device)
times = []
for _ in range(args.steps):
    t0 = time.perf_counter()
    step(args.tensors, args.device)
    times.append(time.perf_counter() - t0)
print("BENCH " + json.dumps({"times": times}))
