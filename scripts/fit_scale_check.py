"""Issue 39's GPU acceptance: `memprof fit --scale` on a conv net. torchvision resnet50 (SGD
momentum, fp32; scripts/fit_workload.py) traced at batch 16 and 32 under `memprof run --trace`,
predicted at 64, 128 and 256, against real runs at those batches (the allocator's own
max_memory_allocated and max_memory_reserved): within 2%. GPT-2 124M traced at batch 4 and 8,
predicted at 32, as scripts/fit_check.py does.

    python3 scripts/fit_scale_check.py MEMPROF OUT
"""
import os
import sys

from fit_runs import FitRuns

MEMPROF, OUT = sys.argv[1], os.path.join(sys.argv[2], "fit-scale")
RUNS = FitRuns(MEMPROF, OUT)
real, trace, fit = RUNS.real, RUNS.trace, RUNS.fit
failures = []


def scale(workload, traced, targets):
    paths = []
    for b in traced:
        path, measured = trace(workload, b)
        paths.append(path)
    total = measured["total_memory"]
    for n in targets:
        p = fit(*paths, "--batches", ",".join(map(str, traced)), "--scale", str(n), "--memory", str(total))
        m = real(workload, n)
        line = [f"{workload} {'/'.join(map(str, traced))} -> {n}:"]
        ok = True
        for key in ("allocated_bytes.all.peak", "reserved_bytes.all.peak"):
            pred, got = p["predicted"][key], m[key]
            err = (pred - got) / got
            ok &= abs(err) <= 0.02
            line.append(f"{key} predicted {pred / 1e9:.3f} GB, real {got / 1e9:.3f} GB ({100 * err:+.2f}%)")
        u = p.get("unmatched")
        if u:
            line.append(f"unmatched: {u['first_allocations']} of the first ({u['first_sized_alike']} sized alike), "
                        f"{u['second_allocations']} of the second")
        print(("  ok   " if ok else "  FAIL ") + "; ".join(line), flush=True)
        if not ok:
            failures.append(line)


def retries(workload, batch, caps):
    """The retry count under caps: predicted from the uncapped trace against the capped run,
    with the out-of-memory errors the run caught (num_ooms)."""
    path, _ = trace(workload, batch)
    for cap in caps:
        p = fit(path, "--memory", str(cap))
        m = real(workload, batch, cap)
        print(f"  retries {workload} b{batch} capped at {cap / 1e9:.3f} GB: predicted "
              f"{p['predicted']['num_alloc_retries']} ({'fits' if p['fits'] else 'OOM'}), real "
              f"{m['num_alloc_retries']} ({'fits' if m['fits'] else 'OOM'}), caught OOMs in the real run "
              f"{m.get('num_ooms')}", flush=True)


scale("resnet50", (16, 32), (64, 128, 256))
scale("gpt2", (4, 8), (32,))
retries("resnet50", 64, (6_149_000_000, 6_442_000_000, 6_736_000_000, 7_030_000_000))
print("fit-scale-check: " + ("PASSED" if not failures else "FAILED (%d)" % len(failures)))
sys.exit(1 if failures else 0)
