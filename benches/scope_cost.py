# What one module scope (open + close) costs, on the CPU, then with CUDA initialised; run inside
# memprof: `memprof --device cuda run --modules benches/scope_cost.py` (the GPU machine).
import sys, time, torch
import _memprof
def per_pair(n=100000):
    t = time.perf_counter()
    for _ in range(n):
        _memprof.scope_close(_memprof.scope_open())
    return (time.perf_counter() - t) / n * 1e9
print("cpu-only process: open+close", round(per_pair()), "ns")
torch.zeros(1, device="cuda")
print("after CUDA init: open+close", round(per_pair()), "ns")
