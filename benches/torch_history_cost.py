"""What torch's own allocator history costs, on CUDA, without memprof: switching its recording
(`torch.cuda.memory._record_memory_history`, which memprof's `--history` does when measured calls
start and end), and an allocation and free of a small block recorded without a stack, with
stacks on allocations only, and with stacks on both (a shallow Python stack: the cost grows with
the stack's depth). On the GPU machine: `/opt/torch/.venv/bin/python benches/torch_history_cost.py`
(BENCHMARKS.md, "Every mode in one call")."""
import time

import torch

x = [torch.ones(1024, 1024, device="cuda") for _ in range(50)]
def rec(ctx):
    torch.cuda.memory._record_memory_history("all", context="all" if ctx else None, stacks="python", max_entries=100000, clear_history=False)
rec(True)
for i in range(2000):
    y = torch.ones(256, device="cuda"); del y
for ctx_after in (False, True):
    ts = []
    for i in range(200):
        t = time.perf_counter(); rec(i % 2 == 0); ts.append(time.perf_counter() - t)
    ts.sort(); print(f"toggle: median {ts[100]*1e6:.1f} us, max {ts[-1]*1e6:.1f} us")
for ctx in (None, "alloc", "all"):
    torch.cuda.memory._record_memory_history("all", context=ctx, stacks="python", max_entries=100000, clear_history=False) if ctx else rec(False)
    t = time.perf_counter()
    for i in range(20000):
        y = torch.ones(256, device="cuda"); del y
    torch.cuda.synchronize()
    print(f"context {ctx}: {(time.perf_counter() - t) / 20000 * 1e6:.2f} us per alloc+free")
torch.cuda.memory._record_memory_history(None)
t = time.perf_counter()
for i in range(20000):
    y = torch.ones(256, device="cuda"); del y
torch.cuda.synchronize()
print(f"no history: {(time.perf_counter() - t) / 20000 * 1e6:.2f} us per alloc+free")
