"""The cost of --modules per module call: 60 blocks of Linear(16, 16) + ReLU in a Sequential
(181 modules), batch 4, forward and backward; the compute is tiny, so the time that memprof adds
is its hooks'. Prints the median step time of 30 steps (STEPS=N: N) after 5 warm-up steps.
    python benches/module_calls.py [cpu|cuda] ; memprof run --modules benches/module_calls.py
(benches/module_calls.sh runs them interleaved.) On cuda each step ends with a synchronize."""
import os
import statistics
import sys
import time

import torch

torch.manual_seed(0)
device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
blocks = [torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()) for _ in range(60)]
model = torch.nn.Sequential(*blocks).to(device)
x = torch.randn(4, 16, device=device)
n = sum(1 for _ in model.modules())


def step():
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()
    if device == "cuda":
        torch.cuda.synchronize()


for _ in range(5):
    step()
times = []
for _ in range(int(os.environ.get("STEPS", "30"))):
    t = time.perf_counter()
    step()
    times.append(time.perf_counter() - t)
m = statistics.median(times)
print(f"BENCH median {m * 1e3:.3f} ms, {n} modules -> {m * 1e6 / n:.2f} us/module")
