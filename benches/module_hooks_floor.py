"""Runs a script with torch's global module hooks registered as memprof --modules registers them
(a forward pre-hook and an always-called forward hook), each doing nothing: the cost torch's
module call path charges for any such hook, which no tool built on these hooks can go below.
With --saved, also a saved-tensors pack and unpack hook that return what they get (memprof
pushes its own, native, around each root module's forward): the cost autograd charges for any
such hook (a Python object for every saved tensor, the GIL on its device thread to unpack it).
    python benches/module_hooks_floor.py [--saved] SCRIPT [ARGS...]   (benches/overhead.sh)"""
import runpy
import sys

import torch
import torch.nn.modules.module as module


def pre_hook(mod, args):
    return None


def post_hook(mod, args, output):
    return None


def same(x):
    return x


module.register_module_forward_pre_hook(pre_hook)
module.register_module_forward_hook(post_hook, always_call=True)
sys.argv = sys.argv[1:]
if sys.argv[0] == "--saved":
    sys.argv = sys.argv[1:]
    torch._C._autograd._push_saved_tensors_default_hooks(same, same)
runpy.run_path(sys.argv[0], run_name="__main__")
