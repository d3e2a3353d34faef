"""What `--history` costs a layered model's forward on the CPU, in instructions and (simulated)
cache misses per step rather than time: run under callgrind by benches/counted.sh, ResNet-50
(benches/module_call_model.py's, module for module; batch 2 at 32x32) runs its forward under
`memprof.profile(step)` (`-f step`) and under `memprof.profile(step, history=FILE)`, each
mode's steps between benches/counted.c's marks. All of a forward's allocator events are the
launching thread's, each with its whole stack (a dozen frames and more), as a GPU step's
forward is, and a bottleneck block's layers reach the allocator through the same inner frames
from different lines of the block: the stacks a thread sees must be told apart beyond their
innermost frames. About 2,850 events a step; with a small last level (CACHE="--LL=262144,8,64",
which the convolutions between events fill, as a GPU host's libraries fill its caches), DLmr
counts the lines memprof's work fetched from memory.

    CACHE="--LL=262144,8,64" benches/counted.sh benches/history_forward_instructions.py [STEPS]
        (default 5; about 6 minutes here)
"""
import os
import sys
import tempfile

import torch

import memprof
from counted import counted
from module_call_model import ResNet50

torch.set_num_threads(1)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
torch.manual_seed(0)
model = ResNet50(10)
x = torch.randn(2, 3, 32, 32)


def step():
    with torch.no_grad():
        model(x)


step()
with memprof.profile(step, device="cpu"):
    counted("targeted", step, steps)
with memprof.profile(step, device="cpu", history=os.path.join(tempfile.mkdtemp(), "h.pickle")):
    counted("history", step, steps)
print("NOTE %d steps per mode" % steps)
print("ROW --history over -f, a ResNet-50 forward history targeted %d" % steps)
