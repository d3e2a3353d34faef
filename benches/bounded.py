# memprof's own memory and the report's size over a long run (issue 50): argv[1] allocations of
# 1 KiB on argv[2] (default cpu; cuda for a long GPU run), a ring of the latest 64 kept, an
# optimizer step (a real torch.optim step on a tiny parameter) every 1000, so the timeline and the
# growth ledger work all the while.
import sys

import torch

N = int(sys.argv[1])
device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
p = torch.nn.Parameter(torch.zeros(4, device=device))
opt = torch.optim.SGD([p], lr=0.1)
p.grad = torch.ones(4, device=device)
ring = [None] * 64
for i in range(N):
    ring[i & 63] = torch.empty(256, device=device)
    if i % 1000 == 999:
        opt.step()
print("done", N)
