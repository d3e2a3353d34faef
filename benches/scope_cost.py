# What one module call's measurement window (open + close) costs, on the CPU, then with CUDA
# initialised; run inside memprof: `memprof --device cuda run --modules benches/scope_cost.py`
# (the GPU machine). A module call first, so that --modules has configured its windows.
import time

import torch

import _memprof


def per_pair(n=100000):
    t = time.perf_counter()
    for _ in range(n):
        _memprof.scope_close(_memprof.scope_open())
    return (time.perf_counter() - t) / n * 1e9


torch.nn.Identity()(torch.zeros(1))
print("cpu-only process: open+close", round(per_pair()), "ns")
torch.nn.Identity()(torch.zeros(1, device="cuda"))
print("after CUDA init: open+close", round(per_pair()), "ns")
