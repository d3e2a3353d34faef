"""What `--modules` costs per module call in instructions and (simulated) cache misses, not in
time: run under callgrind, this script runs the same steps unprofiled, under
`memprof.profile()` (no flags) and under `memprof.profile(modules=True)`, each mode's steps
between two marks (benches/counted.c, built by benches/counted.py: callgrind's client requests) that
collect them alone and dump their counts under the mode's name. Where times spread more than
memprof's per-call work (this build machine: 0.9-8 µs a call from run to run), the counts
(two runs of one build within 1.5%) still compare two builds.

    benches/module_call_instructions.sh [STEPS [gpt2|resnet]]   (runs this under callgrind)

The model is benches/module_call_model.py's, as module_call_cost.py times it: 60 blocks of
Linear(16, 16) + ReLU, 181 module calls a step, forward and backward; or, with `gpt2` after STEPS,
benches/workloads.py's GPT-2 step at its --tiny size (nanoGPT's modules, 2 layers, bf16 autocast,
AdamW: the GPU step's module calls and autograd graph at a size callgrind runs); or, with
`resnet`, torchvision's ResNet-50 module for module (module_call_model.ResNet50: 183 module calls
a step, batch norm's buffers, in-place ReLUs; 2 images of 32 x 32, SGD with momentum: about 25
minutes here at 2 steps). Each mode's
session runs 3 steps before its counted ones; Python's garbage collector is off while they run
(when it runs depends on how many objects were made since it last ran, which moved the counts by a
quarter from run to run), and the script sets PYTHONHASHSEED=0 for the same reason."""
import sys

import torch

import memprof
from counted import counted
from module_call_model import build

torch.set_num_threads(1)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10


def module_calls(step):
    """How many module calls one run of `step` makes (it runs once, uncounted)."""
    calls = 0

    def count(*_):
        nonlocal calls
        calls += 1

    handle = torch.nn.modules.module.register_module_forward_pre_hook(count)
    step()
    handle.remove()
    return calls


if sys.argv[2:3] == ["gpt2"]:
    import workloads

    setup = workloads.gpt2_setup("cpu", batch=2, tiny=True)

    def step():
        workloads.gpt2_train_step(*setup)

    calls = module_calls(step)
elif sys.argv[2:3] == ["resnet"]:
    from module_call_model import ResNet50
    import workloads

    torch.manual_seed(0)
    model = ResNet50(10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images, labels = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))

    def step():
        workloads.train_step(model, optimizer, images, labels)

    calls = module_calls(step)
else:
    model, x, calls = build()

    def step():
        model(x).sum().backward()


counted("unprofiled", step, steps)
with memprof.profile():
    counted("no_flags", step, steps)
with memprof.profile(modules=True):
    counted("modules", step, steps)
print("NOTE %d steps per mode, %d module calls a step" % (steps, calls))
# benches/counted.sh's rows: (mode - base) / units.
print("ROW no flags over unprofiled, a step no_flags unprofiled", steps)
print("ROW --modules over no flags, a call modules no_flags", steps * calls)
