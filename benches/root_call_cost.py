"""What a root module call's own work costs under `--modules`, in µs, on the CPU: the parts that
run once per root call before its first child (modules.py's `_enter_root`, and in it
`_memprof.saved_begin`, which reads the storages of the root's parameters and buffers, and
`_memprof.module_enter_root`, which records the previous step's backwards), each timed by
wrapping it, over 30 steps of module_call_model.ResNet50 (torchvision's ResNet-50 module for
module: 161 parameters, 159 buffers, 53 convolutions without a bias) on 2 images of 32 x 32.
Prints each part's median. On a GPU step these run while the GPU waits for the step's first
kernel. MEMPROF_NATIVE=<build>/libmemprof.so picks a build:

    MEMPROF_NATIVE=<build>/libmemprof.so .venv/bin/python benches/root_call_cost.py
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memprof  # noqa: E402
from module_call_model import ResNet50  # noqa: E402
import workloads  # noqa: E402

torch.set_num_threads(1)
torch.manual_seed(0)
model = ResNet50(10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
images, labels = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
times = {}


def timed(name, f):
    def wrapper(*args, **kwargs):
        start = time.perf_counter_ns()
        try:
            return f(*args, **kwargs)
        finally:
            times.setdefault(name, []).append((time.perf_counter_ns() - start) / 1e3)
    return wrapper


with memprof.profile(modules=True):
    workloads.train_step(model, optimizer, images, labels)  # the tracker is installed now
    native = sys.modules["_memprof"]
    tracker = sys.modules["_memprof_modules"]._tracker
    originals = {n: getattr(native, n) for n in ("saved_begin", "module_enter_root", "module_root_window")}
    for name, f in originals.items():
        setattr(native, name, timed(name, f))
    tracker._enter_root = timed("_enter_root (the whole root call's start)", tracker._enter_root)
    try:
        for _ in range(30):
            workloads.train_step(model, optimizer, images, labels)
    finally:
        for name, f in originals.items():
            setattr(native, name, f)
        del tracker._enter_root
for name, values in times.items():
    print(f"{name}: median {statistics.median(values):.1f} µs over {len(values)} root calls")
