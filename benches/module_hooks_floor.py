"""Runs a script with torch's global module hooks registered as memprof --modules registers them
(a forward pre-hook and an always-called forward hook), each doing nothing: the cost torch's
module call path charges for any such hook, which no tool built on these hooks can go below.
    python benches/module_hooks_floor.py SCRIPT [ARGS...]   (benches/overhead.sh modules runs it)"""
import runpy
import sys

import torch.nn.modules.module as module


def pre_hook(mod, args):
    return None


def post_hook(mod, args, output):
    return None


module.register_module_forward_pre_hook(pre_hook)
module.register_module_forward_hook(post_hook, always_call=True)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
