# pytorch_memlab's README example (docs/from-memlab.md), unchanged but for the device and the
# call: outer() makes two Linear(100, 100) on the GPU and calls inner(), which makes a third.
#   memprof --stat active_bytes.all.peak --stat reserved_bytes.all.peak run -f outer -f inner examples/memlab_readme.py
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def inner():
    torch.nn.Linear(100, 100).to(DEVICE)


def outer():
    linear = torch.nn.Linear(100, 100).to(DEVICE)
    linear2 = torch.nn.Linear(100, 100).to(DEVICE)
    inner()


outer()
