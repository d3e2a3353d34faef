"""Turns the driver's raw results into the BENCHMARKS.md table and the agreement verdicts.

    python3 benches/summarize.py RESULTS_DIR
"""
import json
import os
import statistics
import sys

d = sys.argv[1]


def bench(name):
    with open(os.path.join(d, name)) as f:
        for line in f:
            if line.startswith("BENCH "):
                return json.loads(line[6:])
    raise SystemExit(f"no BENCH line in {name}")


def med(r):
    return statistics.median(r["times"])


rows = []
fails = []


def check(ok, what):
    if not ok:
        fails.append(what)
    return "yes" if ok else "**no**"


# Case 1: ns per traced line.
loop = {p: bench(f"loop-{p}.txt") for p in ["none", "memprof", "memlab", "line_profiler"]}
bare_ns = med(loop["none"]) / loop["none"]["line_events"] * 1e9
per_line = {p: med(r) / r["line_events"] * 1e9 for p, r in loop.items()}
added = {p: v - bare_ns for p, v in per_line.items()}
rows.append(("1. tight loop, every line traced (ns per line)", f"{bare_ns:.0f} ns",
             f"{per_line['memprof']:.0f} ns (+{added['memprof']:.0f})",
             f"{per_line['memlab']:.0f} ns (+{added['memlab']:.0f})",
             f"{per_line['line_profiler']:.0f} ns (+{added['line_profiler']:.0f})",
             "≤ 1000 ns added", check(added["memprof"] <= 1000, "case 1")))

for case, label, target in [("resnet", "2. resnet50 bs32 SGD step, `train_step` targeted", 1.02),
                            ("bottleneck", "3. same, `Bottleneck.forward` targeted", 1.05),
                            ("untargeted", "4. 1M untargeted calls, a rare function targeted", 1.02)]:
    r = {p: bench(f"{case}-{p}.txt") for p in ["none", "memprof", "memlab"]}
    base = med(r["none"])
    ratio = {p: med(v) / base for p, v in r.items()}
    unit = "ms"
    rows.append((label, f"{base * 1e3:.1f} {unit}", f"{ratio['memprof']:.3f}x", f"{ratio['memlab']:.2f}x", "",
                 f"≤ {target}x", check(ratio["memprof"] <= target, f"case {label[0]}")))

with open(os.path.join(d, "startup.json")) as f:
    st = json.load(f)
py_s, mp_s = statistics.median(st["python"]), statistics.median(st["memprof"])
rows.append(("5. start-up: import torch + first CUDA call", f"{py_s:.2f} s", f"{mp_s:.2f} s (+{mp_s - py_s:.2f} s)", "", "",
             "≤ 0.3 s added", check(mp_s - py_s <= 0.3, "case 5")))

rn, rm = bench("resnet-none.txt"), bench("resnet-memprof.txt")
gpu_added = rm["gpu_used_bytes"] - rn["gpu_used_bytes"]
rows.append(("6. footprint after the resnet50 run: GPU memory added (mem_get_info)", "", f"{gpu_added} B", "", "",
             "0 B", check(gpu_added == 0 and rm["memory_reserved"] == rn["memory_reserved"], "case 6 (GPU)")))
rows.append(("6. footprint: host RSS added", f"{rn['rss_bytes'] / 2**20:.0f} MiB", f"+{(rm['rss_bytes'] - rn['rss_bytes']) / 2**20:.1f} MiB", "", "", "", ""))

print("| case | no profiler | memprof | pytorch_memlab 0.3.2 | line_profiler 5.1 (time only) | target | met |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for row in rows:
    print("| " + " | ".join(row) + " |")

# Agreement.
print()
for kind in ["resnet", "gpt2"]:
    def readings(name):
        with open(os.path.join(d, name)) as f:
            for line in f:
                if line.startswith("READINGS "):
                    return json.loads(line[9:])
    plain, under = readings(f"agree-{kind}-plain.txt"), readings(f"agree-{kind}-memprof.txt")
    with open(os.path.join(d, f"agree-{kind}.json")) as f:
        report = json.load(f)
    step = next(fn for fn in report["functions"] if fn["qualname"] == "train_step")
    lines = [l for l in step["lines"] if "stats" in l]
    max_peak = max(l["stats"]["allocated_bytes.all.peak"] for l in lines)
    delta_sum = sum(l["delta_bytes"] for l in lines)
    torch_peak = max(r["max_memory_allocated"] for r in plain)
    torch_delta = sum(r["memory_allocated_delta"] for r in plain)
    print(f"agreement {kind}: largest per-line allocated_bytes.all.peak {max_peak} vs torch.cuda.max_memory_allocated() {torch_peak}: "
          f"{check(max_peak == torch_peak, kind + ' peak')}; sum of Δ {delta_sum} vs memory_allocated() change {torch_delta}: "
          f"{check(delta_sum == torch_delta, kind + ' delta')}; program's readings identical with and without memprof: "
          f"{check(plain == under, kind + ' readings')}")
    memlab = None
    with open(os.path.join(d, f"agree-{kind}-memlab.txt")) as f:
        for line in f:
            if line.startswith("MEMLAB "):
                memlab = {int(k): v for k, v in json.loads(line[7:]).items()}
    if memlab:
        print(f"  per-line allocated_bytes.all.peak, memprof vs pytorch_memlab ({kind}):")
        for l in step["lines"]:
            ours = l.get("stats", {}).get("allocated_bytes.all.peak")
            theirs = memlab.get(l["line"])
            if ours is None and theirs is None:
                continue
            mark = "same" if ours == theirs else "differs"
            print(f"    line {l['line']:>3} {str(ours):>12} {str(theirs):>12}  {mark}  {l['source'].strip()[:60]}")
print()
print("ALL TARGETS MET" if not fails else "MISSED: " + ", ".join(fails))
