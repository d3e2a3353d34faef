"""What memprof's modes cost a training step, measured inside one process (issue 53's method,
second half): blocks of steps with a `memprof.profile` session running alternate with blocks
without, in an order shuffled per round, so that both sides of every ratio ran on the same cores,
the same GPU, the same clocks and the same neighbours, seconds apart.

    python3 benches/paired_cost.py resnet|gpt2|mlp [--device cuda] [--rounds 16] [--steps 6]
        [--lead 0] [--variants none,f,modules,tensors] [--seed N]

Why: on the shared GPU hosts the step of a CPU-bound workload (resnet50, batch 32) moves by
±20% from process to process (20.5 to 26 ms for python3 alone in one set), and sets of
processes taken minutes apart moved memprof's ratio from 1.00x to 1.14x while its code did not
change. Across processes (benches/modes_cost.sh) that noise is what is measured; within one
process it cancels.

Each round runs one block of `--steps` steps per variant: `base` and `control` unprofiled (their
ratio is the noise floor), `none` under `memprof.profile()` (no flags: the peak tracker and the
site of every allocation), `f` under `memprof.profile(STEP)` (the step's lines), `modules`
under `memprof.profile(modules=True)` (saved bytes counted without a hook), `modules_hooks` and
`modules_python` the same counting through saved-tensors hooks in C++ or in Python
(MEMPROF_SAVED_HOOKS=hooks or python, as before), `tensors` under
`memprof.profile(STEP, tensors=True)` (an inventory when each step ends), `history` under
`memprof.profile(STEP, history=FILE)` (`-f STEP --history FILE`: memprof's record of every
allocator event with its whole Python stack, in every step, each block's file written when its
session stops),
`history_calls` the same with `calls=1` (`--calls 1`: the block's first step, which is not
counted, recorded with stacks, and then nothing: the history taken and recording stopped, what
a long run that records a few calls pays for the rest); two floors without memprof, `wrapper`
(torch's `Module._call_impl` wrapped by a Python function that only calls it) and
`wrapper_calls` (that wrapper also calling a C function twice per module call, as memprof's
calls its native enter and exit); and three of torch's own allocator history without memprof,
recorded as `--history` recorded it before it was memprof's own: `torch_history` (Python stacks
on every event), `torch_history_alloc` (on allocations only), `torch_history_nostack` (none).
A session starts before its block's first step and stops after the last, outside the timed
steps; each block's
first step is not counted (a session's first call does one-time work: wrapping the modules, the
first inventory's walk of every object). With `--lead N`, N more steps run uncounted at each
block's start, inside its session: the block then measures the session's steady state, as a
training run's later steps pay it; without, its first steps, in which no flags' work on the
CPU's MLP step is over a quarter more in instructions (a fresh session's timeline closes a point
per event at first and merges its points at each doubling of their width;
benches/session_steps_instructions.py counts it step by step).
What stays in the process between sessions is memprof's allocation reporter in libtorch's
profiler slot (installed once per process), which then returns at once: its cost is in the
process-level method (benches/modes_cost.sh), not in these ratios.

Prints one BENCH line: every counted step's time per variant, in seconds (`blocks`), the
launching thread's part of each (`host_blocks`: until the step's Python returned, before waiting
for the GPU), and each round's order. benches/paired_table.py makes the table from the lines of
several processes.
"""
import argparse
import contextlib
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import workloads  # noqa: E402

VARIANTS = ("none", "f", "modules", "modules_hooks", "modules_python", "tensors", "history",
            "history_calls")
# Where the `history` variant's session writes its file (each block's replaces the last's).
HISTORY_FILE = os.path.join(os.environ.get("TMPDIR", "/tmp"), "memprof-paired-%d.pickle" % os.getpid())
# Floors, not modes: what any per-call wrapper of Module._call_impl costs the step, and what
# torch's own allocator history costs it without memprof (stacks on every event, on allocations
# only, none).
FLOORS = ("wrapper", "wrapper_calls")
TORCH_HISTORY = {"torch_history": "all", "torch_history_alloc": "alloc",
                 "torch_history_nostack": None}


def session(memprof, variant, step_fn):
    """The profile session a block of `variant` runs under (None: unprofiled)."""
    if variant in ("base", "control"):
        return None
    if variant == "none":
        return memprof.profile()
    if variant == "f":
        return memprof.profile(step_fn)
    if variant == "modules":
        return memprof.profile(modules=True)
    if variant in ("modules_hooks", "modules_python"):
        return _saved_hooks(memprof, variant[len("modules_"):])
    if variant == "tensors":
        return memprof.profile(step_fn, tensors=True)
    if variant == "history":
        return memprof.profile(step_fn, history=HISTORY_FILE)
    if variant == "history_calls":
        return memprof.profile(step_fn, history=HISTORY_FILE, calls=1)
    if variant in FLOORS:
        return _wrapped_call_impl(variant == "wrapper_calls")
    if variant in TORCH_HISTORY:
        return _torch_history(TORCH_HISTORY[variant])
    raise SystemExit(f"paired_cost: unknown variant {variant!r} (one of "
                     f"{', '.join(VARIANTS + FLOORS + tuple(TORCH_HISTORY))})")


@contextlib.contextmanager
def _torch_history(context):
    """A floor: torch's allocator history recorded as `--history` records it (every event,
    Python stacks on `context`'s events), without memprof; the history is taken when the
    block ends, as a session's would be, and recording stops."""
    torch.cuda.memory._record_memory_history("all", context=context, stacks="python",
                                             max_entries=100000, clear_history=True)
    try:
        yield None
    finally:
        torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(None)


@contextlib.contextmanager
def _wrapped_call_impl(calls):
    """A floor: `Module._call_impl` wrapped as memprof wraps it, by a Python function that only
    calls torch's (`wrapper`), or that also makes two calls to a C function per module call, as
    memprof's wrapper calls its native enter and exit (`wrapper_calls`: operator.is_, which does
    nothing but compare). No tool that sees each module call from Python can cost less."""
    import operator
    module_cls = torch.nn.Module
    original = module_cls._call_impl
    native = operator.is_

    if calls:
        def _call_impl(self, *args, **kwargs):
            todo = native(self, args)
            if not todo:
                output = original(self, *args, **kwargs)
                native(self, output)
                return output
            return original(self, *args, **kwargs)
    else:
        def _call_impl(self, *args, **kwargs):
            return original(self, *args, **kwargs)

    module_cls._call_impl = _call_impl
    try:
        yield None
    finally:
        module_cls._call_impl = original


@contextlib.contextmanager
def _saved_hooks(memprof, which):
    """`modules` counting saved bytes through saved-tensors hooks (`which`: hooks, in C++, or
    python): the environment is read when the session's first module call configures its
    tracker, inside the block."""
    os.environ["MEMPROF_SAVED_HOOKS"] = which
    try:
        with memprof.profile(modules=True) as p:
            yield p
    finally:
        del os.environ["MEMPROF_SAVED_HOOKS"]


def block(step, steps, cuda, spans=None, lead=0):
    """Times `steps` steps, each waited for, the first (and `lead` more before it) left out:
    the whole step, and the
    launching thread's part of it (until the step's Python returned, before waiting for the
    GPU), which is where memprof's work is. Where the GPU is the bottleneck, the whole step
    hides that work (the thread runs ahead and then waits); the launching part shows it.
    `spans`, where given, receives each counted step's launching part as monotonic-clock
    nanoseconds (perf_counter's clock: `perf record -k CLOCK_MONOTONIC` stamps its samples with
    it), so that a profile's samples can be told apart by block (benches/paired_profile.py)."""
    times, host = [], []
    for _ in range(lead):
        step()
    for i in range(steps):
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter_ns()
        step()
        launched = time.perf_counter_ns()
        if cuda:
            torch.cuda.synchronize()
        if i > 0:
            times.append((time.perf_counter_ns() - t) / 1e9)
            host.append((launched - t) / 1e9)
            if spans is not None:
                spans.append((t, launched))
    return times, host


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["resnet", "gpt2", "mlp"],
                   help="mlp: workloads.mlp_setup's launch-bound CPU step (set --device cpu)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="gpt2 at 2 layers of 64 (a CPU check)")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--rounds", type=int, default=16)
    p.add_argument("--steps", type=int, default=6, help="steps per block, the first not counted")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--lead", type=int, default=0,
                   help="steps more at each block's start, not counted (inside its session): "
                        "a session's steady state rather than its first steps")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--spans", action="store_true",
                   help="also print each counted step's launching part in monotonic ns, per variant")
    args = p.parse_args()
    import memprof

    cuda = args.device.startswith("cuda")
    if args.case == "gpt2":
        setup = workloads.gpt2_setup(args.device, args.batch or 12, args.tiny)
        step_fn = workloads.gpt2_train_step
    elif args.case == "mlp":
        torch.set_num_threads(1)
        setup = workloads.mlp_setup(args.device, args.batch or 8)
        step_fn = workloads.train_step
    else:
        setup = workloads.resnet_setup(args.device, args.batch or 32)
        step_fn = workloads.train_step

    def step():
        step_fn(*setup)

    for _ in range(args.warmup):
        step()
    variants = ["base", "control"] + [v for v in args.variants.split(",") if v]
    times = {v: [] for v in variants}
    host = {v: [] for v in variants}
    spans = {v: [] for v in variants}
    orders = []
    rng = random.Random(args.seed)
    for _ in range(args.rounds):
        order = variants[:]
        rng.shuffle(order)
        orders.append(order)
        for v in order:
            s = session(memprof, v, step_fn)
            with s if s is not None else contextlib.nullcontext():
                whole, launching = block(step, args.steps, cuda,
                                         spans[v] if args.spans else None, args.lead)
            times[v].append(whole)
            host[v].append(launching)
    out = {"case": args.case, "device": args.device, "steps": args.steps, "lead": args.lead,
           "blocks": times, "host_blocks": host, "orders": orders}
    if args.spans:
        out["spans"] = spans
    if "history" in variants or "history_calls" in variants:
        import pickle
        with open(HISTORY_FILE, "rb") as f:
            snapshot = pickle.load(f)
        out["history_events"] = snapshot["memprof"]["events"]
        os.remove(HISTORY_FILE)
    print("BENCH " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
