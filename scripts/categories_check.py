"""The peak by what it is, against torch's own memory profiler (issue 38), on the GPU machine.

    python3 scripts/categories_check.py CASE --steps N          # the workload alone (memprof runs it)
    python3 scripts/categories_check.py CASE --torch-profiler   # torch's categories at its peak
    python3 scripts/categories_check.py --compare REPORT.json TORCH.json CONTEXT.json

CASE is `resnet` (torchvision resnet50, batch 32, SGD momentum, as benches/workloads.py) or
`gpt2` (nanoGPT's GPT-2 124M, batch 12 x 1024, bf16 autocast, fused AdamW, as
examples/gpt2_train.py). Run alone, the workload writes what the driver counted for it at its end
(nvidia-smi's line for its pid, and cudaMemGetInfo's used bytes) to $CATEGORIES_DRIVER if set.
`--context-probe` prints the device memory a bare CUDA context takes (a fresh process, no tensor).
`--compare` prints memprof's categories beside torch's and the device split, and says whether the
issue's bounds held.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# torch's categories (torch.profiler._memory_profiler.Category) as memprof names them.
TORCH_TO_MEMPROF = {
    "PARAMETER": "parameters",
    "OPTIMIZER_STATE": "optimizer_state",
    "INPUT": "inputs",
    "TEMPORARY": "temporaries",
    "ACTIVATION": "activations",
    "GRADIENT": "gradients",
    "AUTOGRAD_DETAIL": "autograd_temporaries",
    None: "other",
}


def workload(case):
    """(step function) for CASE, set up on cuda:0."""
    import torch

    if case == "resnet":
        sys.path.insert(0, os.path.join(ROOT, "benches"))
        from workloads import resnet_setup, train_step

        model, optimizer, images, labels = resnet_setup()
        return lambda: train_step(model, optimizer, images, labels)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from gpt2_model import GPT, GPTConfig

    torch.manual_seed(1337)
    model = GPT(GPTConfig(block_size=1024, vocab_size=50304, n_layer=12, n_head=12, n_embd=768))
    model.to("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16)

    def step():
        x = torch.randint(0, 50304, (12, 1024), device="cuda")
        y = torch.randint(0, 50304, (12, 1024), device="cuda")
        with autocast:
            logits, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return logits, loss

    return step


def driver_counts():
    """What the driver counts now: nvidia-smi's line for this pid (None: not listed) and the
    device's used bytes by cudaMemGetInfo."""
    import torch

    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    smi = None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30,
        ).stdout
        for line in out.splitlines():
            pid, used = [x.strip() for x in line.split(",")]
            if int(pid) == os.getpid():
                smi = int(used) * 1024 * 1024
    except Exception as e:  # the check says it could not read it
        print(f"nvidia-smi: {e}", file=sys.stderr)
    return {
        "nvidia_smi_process_bytes": smi,
        "mem_get_info_used_bytes": total - free,
        "memory_reserved": torch.cuda.memory_reserved(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
    }


def run_alone(case, steps):
    step = workload(case)
    for _ in range(steps):
        out = step()
    del out
    counts = driver_counts()
    path = os.environ.get("CATEGORIES_DRIVER")
    if path:
        with open(path, "w") as f:
            json.dump(counts, f)
    print("DRIVER " + json.dumps(counts))


def context_probe():
    import torch

    torch.cuda.init()
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print(json.dumps({"context_bytes": total - free}))


def torch_profiler(case, out_path):
    """torch's categories at the highest total of two profiled steps after three warm-up ones."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

    step = workload(case)
    for _ in range(3):
        out = step()
    del out
    torch.cuda.synchronize()
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        profile_memory=True, record_shapes=True, with_stack=True,
    ) as prof:
        for _ in range(2):
            out = step()
        del out
        torch.cuda.synchronize()
    timeline = MemoryProfileTimeline(prof._memory_profile())
    _, sizes = timeline._coalesce_timeline("cuda:0")
    at = max(range(len(sizes)), key=lambda i: sum(sizes[i]))
    result = {}
    for category, i in _CATEGORY_TO_INDEX.items():
        name = TORCH_TO_MEMPROF[None if category is None else category.name]
        result[name] = result.get(name, 0) + sizes[at][i + 1]
    result["total"] = sum(sizes[at])
    with open(out_path, "w") as f:
        json.dump(result, f)
    print("TORCH " + json.dumps(result))


def gb(n):
    return f"{n / 1e9:.3f} GB"


def compare(report_path, torch_path, driver_path, context_path, case):
    report = json.load(open(report_path))
    peak = report["peak"]
    mine = peak.get("categories", {})
    theirs = json.load(open(torch_path))
    driver = json.load(open(driver_path)) if driver_path and os.path.exists(driver_path) else {}
    context = json.load(open(context_path)) if context_path and os.path.exists(context_path) else {}
    total = peak["allocated_bytes"]
    print(f"\n== {case}: peak {gb(total)} (memprof, whole run); torch's profiled peak {gb(theirs['total'])}")
    names = sorted(set(mine) | set(theirs) - {"total"}, key=lambda n: -mine.get(n, 0))
    print(f"{'category':<22}{'memprof':>14}{'share':>8}{'torch':>14}{'share':>8}")
    for n in names:
        m, t = mine.get(n, 0), theirs.get(n, 0)
        print(f"{n:<22}{gb(m):>14}{100 * m / total:>7.1f}%{gb(t):>14}{100 * t / theirs['total']:>7.1f}%")
    unnamed = mine.get("other", 0) + peak.get("unseen_bytes", 0)
    ok = True

    def check(what, good):
        nonlocal ok
        ok &= good
        print(f"  {'ok  ' if good else 'FAIL'} {what}")

    check(f"other or uncategorised {gb(unnamed)} = {100 * unnamed / total:.2f}% of the peak (< 1%)",
          unnamed < 0.01 * total)
    if case == "resnet":
        a, t = mine.get("activations", 0), theirs.get("activations", 0)
        check(f"activations {gb(a)} against torch's ACTIVATION {gb(t)}: {100 * (a - t) / t:+.2f}% (within 2%)",
              t > 0 and abs(a - t) <= 0.02 * t)
    else:
        a = mine.get("autograd_temporaries", 0)
        check(f"the backward's gradients of activations in flight named autograd temporaries: {gb(a)}",
              a > 1e9)
        logits = [s for s in peak["sites"] if "lm_head" in s["source"]]
        named = logits and logits[0].get("categories", {}).get("activations", 0) == logits[0]["bytes"]
        check("the logits (logits = self.lm_head(x)) named activations"
              + (f": {gb(logits[0]['bytes'])}" if logits else ": no site"), bool(named))
    split = peak.get("device")
    if split and split.get("kind") == "cuda":
        print(f"device at the peak {gb(split['process_bytes'])} ({split['driver_source']}) = context "
              f"{gb(split['context_bytes'])} + outside the allocator {gb(split['outside_allocator_bytes'])} "
              f"+ reserved {gb(split['reserved_bytes'])} (allocated {gb(split['allocated_bytes'])}, cached "
              f"{gb(split['cached_bytes'])}; inactive split peak {gb(split['inactive_split_peak_bytes'])})")
        smi = driver.get("nvidia_smi_process_bytes")
        used = driver.get("mem_get_info_used_bytes")
        # The workload's own reading at its end, with the reservation the allocator kept then.
        reference = smi if smi else used
        at_end = split["process_bytes"] - split["reserved_bytes"] + split["reserved_bytes_at_end"]
        if reference:
            check(f"the split at the end {gb(at_end)} against the driver's count the program read "
                  f"({'nvidia-smi, this pid' if smi else 'cudaMemGetInfo'}) {gb(reference)}: "
                  f"{100 * (at_end - reference) / reference:+.2f}% (within 1%)",
                  abs(at_end - reference) <= 0.01 * reference)
        if context.get("context_bytes"):
            c = context["context_bytes"]
            print(f"  (a bare CUDA context in a fresh process: {gb(c)}; memprof's context "
                  f"{gb(split['context_bytes'])})")
    else:
        check("the device split is in the report", False)
    return ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", nargs="?", choices=["resnet", "gpt2"])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--torch-profiler", metavar="OUT")
    p.add_argument("--context-probe", action="store_true")
    p.add_argument("--compare", nargs=4, metavar=("REPORT", "TORCH", "DRIVER", "CONTEXT"))
    args = p.parse_args()
    if args.context_probe:
        context_probe()
    elif args.compare:
        sys.exit(0 if compare(*args.compare, args.case) else 1)
    elif args.torch_profiler:
        torch_profiler(args.case, args.torch_profiler)
    else:
        run_alone(args.case, args.steps)


if __name__ == "__main__":
    main()
