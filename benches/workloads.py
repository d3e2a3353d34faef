"""The benchmark workloads, one case per process.

    python3 benches/workloads.py CASE --profiler none|memlab|line_profiler
    memprof run -f TARGET benches/workloads.py CASE --profiler memprof

memprof profiles from outside (as users run it); pytorch_memlab 0.3.2 and line_profiler wrap the
same target in-process, as their users do. Prints one JSON line: the timings of the repeats that
follow the warm-up, and the process's footprint.
"""
import argparse
import json
import os
import sys
import time

import torch


# Case 1: a tight pure-Python loop, every line traced.
def tight(n):
    s = 0
    for i in range(n):
        s += i
    return s


# Case 4: Python-heavy code that is not targeted, while a rarely called function is.
def small(x):
    return x + 1


def heavy(n):
    t = 0
    for i in range(n):
        t = small(t)
    return t


def rare():
    return torch.zeros(1)


def train_step(model, optimizer, images, labels):
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss


def resnet_setup(device="cuda", batch=32):
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(batch, 3, 224, 224, device=device)
    labels = torch.randint(0, 1000, (batch,), device=device)
    return model, optimizer, images, labels


class _Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.norm = torch.nn.BatchNorm1d(width)

    def forward(self, x):
        return x + torch.relu(self.norm(self.linear(x)))


def mlp_setup(device="cpu", batch=8, width=16):
    """A step shaped like a launch-bound one with none of its compute: 32 residual blocks of a
    16-wide linear layer, batch norm and relu, in 4 stages, SGD with momentum (about 1,800
    allocator events a step of 2.4 ms on one CPU thread). On a machine without a GPU it stands
    for resnet50's step on an H100, whose time follows the launching thread's: each op's cost is
    its dispatch, and memprof's per-event work shows as it does there."""
    torch.manual_seed(0)
    stages = [torch.nn.Sequential(*[_Block(width) for _ in range(8)]) for _ in range(4)]
    model = torch.nn.Sequential(*stages, torch.nn.Linear(width, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(batch, width, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    return model, optimizer, images, labels


def gpt2_setup(device="cuda", batch=12, tiny=False):
    """examples/gpt2_train.py's step as a function (nanoGPT's GPT-2 124M, bf16 autocast, fused
    AdamW, gradient clipping, 1024 tokens), so that `-f train_step` targets the same step in
    both cases."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from gpt2_model import GPT, GPTConfig
    torch.manual_seed(1337)
    cuda = device.startswith("cuda")
    # --tiny: the same code at a size a CPU runs in a moment (the benchmark scripts' own checks).
    seq, vocab = (64, 512) if tiny else (1024, 50304)
    config = GPTConfig(block_size=seq, vocab_size=vocab, n_layer=2 if tiny else 12,
                       n_head=2 if tiny else 12, n_embd=64 if tiny else 768)
    model = GPT(config)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                                  weight_decay=0.1, fused=cuda)
    x = torch.randint(0, vocab, (batch, seq), device=device)
    y = torch.randint(0, vocab, (batch, seq), device=device)
    autocast = torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16)
    return model, optimizer, x, y, autocast


def gpt2_train_step(model, optimizer, x, y, autocast):
    with autocast:
        _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def perf_control(command):
    """Tells `perf record --control=fifo:FIFO -D -1` (FIFO in BENCH_PERF_CTL) to start or stop
    sampling: benches/cpu_profile.sh samples exactly the timed repeats, so that two processes'
    samples compare one for one."""
    fifo = os.environ.get("BENCH_PERF_CTL")
    if fifo:
        with open(fifo, "w") as f:
            f.write(command + "\n")


def timed(fn, warmup, repeats, sync=False, gpu_times=None):
    """The wall time of each repeat after the warm-up; with sync, each on an idle GPU and
    waited for, and (given the list gpu_times) the GPU's own time of each from CUDA events: the
    span from the step's first work on the stream to its last."""
    for _ in range(warmup):
        fn()
    perf_control("enable")
    times = []
    if sync:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(repeats):
        if sync:
            torch.cuda.synchronize()
        t = time.perf_counter()
        if sync:
            start.record()
        fn()
        if sync:
            end.record()
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        if sync and gpu_times is not None:
            gpu_times.append(start.elapsed_time(end) / 1e3)
    perf_control("disable")
    return times


def wrap(profiler, *functions):
    """Starts pytorch_memlab's or line_profiler's line profiler on `functions`."""
    if profiler == "memlab":
        from pytorch_memlab import LineProfiler
        prof = LineProfiler(*functions)
        prof.enable()
        return prof
    if profiler == "line_profiler":
        from line_profiler import LineProfiler
        prof = LineProfiler(*functions)
        prof.enable_by_count()
        return prof
    return None


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cuda_readings(out, args, step):
    """Times the step (wall and, on CUDA, the GPU's own time) and reads the device's memory."""
    cuda = args.device.startswith("cuda")
    gpu_times = []
    out["times"] = timed(step, args.warmup, args.repeats, sync=cuda, gpu_times=gpu_times)
    if not cuda:
        return
    out["gpu_times"] = gpu_times
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    out["gpu_used_bytes"] = total - free
    out["memory_reserved"] = torch.cuda.memory_reserved()
    out["memory_allocated"] = torch.cuda.memory_allocated()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["loop", "resnet", "bottleneck", "untargeted", "gpt2"])
    p.add_argument("--device", default="cuda", help="resnet, bottleneck, gpt2: where the model runs")
    p.add_argument("--batch", type=int, default=None,
                   help="resnet, bottleneck, gpt2: the batch (32 images, 12 sequences of 1024)")
    p.add_argument("--tiny", action="store_true", help="gpt2: 2 layers of 64, 64 tokens")
    p.add_argument("--warmup", type=int, default=5, help="steps before the timed repeats")
    p.add_argument("--profiler", default="none")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--bench-out", default=None,
                   help="also append the BENCH line to this file (for a run whose output is a "
                        "terminal's, as under `memprof run --live`)")
    p.add_argument("--monitor-unwind", action="store_true",
                   help="diagnosis: what memprof's one global event (PY_UNWIND) costs plain python")
    args = p.parse_args()
    if args.monitor_unwind:
        mon = sys.monitoring
        mon.use_tool_id(5, "unwind-cost")
        mon.register_callback(5, mon.events.PY_UNWIND, lambda *a: None)
        mon.set_events(5, mon.events.PY_UNWIND)
    out = {"case": args.case, "profiler": args.profiler}
    if args.case == "loop":
        wrap(args.profiler, tight)
        out["times"] = timed(lambda: tight(args.n), 1, args.repeats)
        out["line_events"] = 2 * args.n + 2
    elif args.case == "untargeted":
        rare()  # called once, before the measured code; it is the target
        wrap(args.profiler, rare)
        out["times"] = timed(lambda: heavy(args.n), 1, args.repeats)
    elif args.case == "gpt2":
        setup = gpt2_setup(args.device, args.batch or 12, args.tiny)
        step = lambda: gpt2_train_step(*setup)  # noqa: E731
        wrap(args.profiler, gpt2_train_step)
        cuda_readings(out, args, step)
    else:
        model, optimizer, images, labels = resnet_setup(args.device, args.batch or 32)
        step = lambda: train_step(model, optimizer, images, labels)  # noqa: E731
        if args.profiler == "memtracker":
            # PyTorch's own per-module tracker (torch.distributed._tools), the baseline of
            # --modules: one tracked step at a time, as it supports.
            from torch.distributed._tools.mem_tracker import MemTracker
            tracker = MemTracker()
            tracker.track_external(model, optimizer)

            def step():
                with tracker:
                    train_step(model, optimizer, images, labels)
                tracker.reset_mod_stats()
        elif args.profiler == "memreporter":
            # pytorch_memlab's tensor report after every step, the baseline of --tensors.
            from pytorch_memlab import MemReporter
            reporter = MemReporter(model)

            def step():
                train_step(model, optimizer, images, labels)
                reporter.report()
        elif args.profiler == "torch_history":
            # PyTorch's own allocator history over the whole run, as its memory tutorial records
            # it: the baseline of --history.
            torch.cuda.memory._record_memory_history(max_entries=100000)
        elif args.case == "resnet":
            wrap(args.profiler, train_step)
        else:
            import torchvision
            wrap(args.profiler, torchvision.models.resnet.Bottleneck.forward)
        cuda_readings(out, args, step)
    out["rss_bytes"] = rss_bytes()
    sys.stdout.flush()
    line = "BENCH " + json.dumps(out)
    print(line, flush=True)
    if args.bench_out:
        with open(args.bench_out, "a") as f:
            print(line, file=f)


if __name__ == "__main__":
    main()
