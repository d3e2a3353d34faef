"""The cost of --modules per module call, on the CPU: 60 blocks of Linear(16, 16) + ReLU in a
Sequential (181 modules), batch 4, forward and backward; the compute is tiny, so the time that
memprof adds is its hooks'. Prints the median step time of 30 steps after 5 warm-up steps.
    python benches/module_calls.py ; memprof run --modules benches/module_calls.py
(benches/module_calls.sh runs them interleaved.)"""
import sys, time, statistics, torch
torch.manual_seed(0)
layers = []
for _ in range(60):
    layers += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
model = torch.nn.Sequential(*[torch.nn.Sequential(layers[i], layers[i+1]) for i in range(0, len(layers), 2)])
x = torch.randn(4, 16)
def step():
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()
for _ in range(5): step()
ts = []
for _ in range(30):
    t = time.perf_counter(); step(); ts.append(time.perf_counter() - t)
n = sum(1 for _ in model.modules())
print(f"BENCH median {statistics.median(ts)*1e3:.3f} ms, {n} modules -> {statistics.median(ts)*1e6/n:.2f} us/module")
