"""What torch's own allocator history costs, on CUDA, without memprof: switching its recording
(`torch.cuda.memory._record_memory_history`, which memprof's `--history` does when measured calls
start and end), and an allocation and free of a small block recorded without a stack, with
stacks on allocations only, and with stacks on both (a shallow Python stack: the cost grows with
the stack's depth). On the GPU machine: `/opt/torch/.venv/bin/python benches/torch_history_cost.py`
(BENCHMARKS.md, "Every mode in one call")."""
import time

import torch

ROUNDS = 20000


def record(context):
    torch.cuda.memory._record_memory_history("all", context=context, stacks="python",
                                             max_entries=100000, clear_history=False)


def churn():
    """Microseconds per allocation and free of a 1 KiB block."""
    t = time.perf_counter()
    for _ in range(ROUNDS):
        y = torch.ones(256, device="cuda")
        del y
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / ROUNDS * 1e6


kept = [torch.ones(1024, 1024, device="cuda") for _ in range(50)]
record("all")
churn()
switches = []
for i in range(400):
    t = time.perf_counter()
    record("all" if i % 2 else None)
    switches.append(time.perf_counter() - t)
switches.sort()
print(f"switching the recording: median {switches[200] * 1e6:.1f} us, max {switches[-1] * 1e6:.1f} us")
for context in (None, "alloc", "all"):
    record(context)
    print(f"recorded, stacks {context or 'none'}: {churn():.2f} us per allocation and free")
torch.cuda.memory._record_memory_history(None)
print(f"not recorded: {churn():.2f} us per allocation and free")
