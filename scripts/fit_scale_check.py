"""Issue 39's GPU acceptance: `memprof fit --scale` on a conv net. torchvision resnet50 (SGD
momentum, fp32; scripts/fit_workload.py) traced at batch 16 and 32 under `memprof run --trace`,
predicted at 64, 128 and 256, against real runs at those batches (the allocator's own
max_memory_allocated and max_memory_reserved): within 2%. GPT-2 124M traced at batch 4 and 8,
predicted at 32, as scripts/fit_check.py does.

    python3 scripts/fit_scale_check.py MEMPROF OUT
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "fit_workload.py")
MEMPROF, OUT = sys.argv[1], os.path.join(sys.argv[2], "fit-scale")
os.makedirs(OUT, exist_ok=True)
failures = []


def fit_line(stdout):
    lines = [l for l in stdout.splitlines() if l.startswith("FIT ")]
    if not lines:
        raise SystemExit("fit_scale_check: the workload printed no FIT line:\n" + stdout[-2000:])
    return json.loads(lines[-1][4:])


def real(workload, batch):
    cmd = [sys.executable, WORKLOAD, workload, "--batch", str(batch)]
    return fit_line(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def trace(workload, batch):
    path = os.path.join(OUT, f"{workload}.b{batch}.json")
    done = subprocess.run([MEMPROF, "run", "--trace", path, "-o", path + ".report.json", WORKLOAD, workload,
                           "--batch", str(batch)], capture_output=True, text=True, check=True)
    return path, fit_line(done.stdout)


def fit(*args):
    done = subprocess.run([MEMPROF, "fit", *args, "--format", "json"], capture_output=True, text=True)
    if done.returncode not in (0, 5):
        raise SystemExit(f"memprof fit {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return json.loads(done.stdout)


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
        m = real_capped(workload, batch, cap)
        print(f"  retries {workload} b{batch} capped at {cap / 1e9:.3f} GB: predicted "
              f"{p['predicted']['num_alloc_retries']} ({'fits' if p['fits'] else 'OOM'}), real "
              f"{m['num_alloc_retries']} ({'fits' if m['fits'] else 'OOM'}), caught OOMs in the real run "
              f"{m.get('num_ooms')}", flush=True)


def real_capped(workload, batch, cap):
    cmd = [sys.executable, WORKLOAD, workload, "--batch", str(batch), "--cap", str(cap)]
    return fit_line(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


scale("resnet50", (16, 32), (64, 128, 256))
scale("gpt2", (4, 8), (32,))
retries("resnet50", 64, (6_149_000_000, 6_442_000_000, 6_736_000_000, 7_030_000_000))
print("fit-scale-check: " + ("PASSED" if not failures else "FAILED (%d)" % len(failures)))
sys.exit(1 if failures else 0)
