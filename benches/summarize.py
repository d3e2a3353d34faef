"""Turns benches/run.sh's raw results into the BENCHMARKS.md table and the agreement verdicts.

    python3 benches/summarize.py RESULTS_DIR [all|loop|resnet|modules|untargeted|startup|agree]
"""
import json
import os
import statistics
import sys

d = sys.argv[1]
only = sys.argv[2] if len(sys.argv) > 2 else "all"
rows = []
fails = []


def want(section):
    return only in ("all", section)


def rounds(name):
    """Every round's BENCH record of one variant."""
    with open(os.path.join(d, name + ".txt")) as f:
        return [json.loads(line[6:]) for line in f if line.startswith("BENCH ")]


def med(name):
    """Median over rounds of each process's median time."""
    return statistics.median(statistics.median(r["times"]) for r in rounds(name))


def check(ok, what):
    if not ok:
        fails.append(what)
    return "yes" if ok else "**no**"


if want("loop"):
    events = rounds("loop-none")[0]["line_events"]
    per_line = {p: med(f"loop-{p}") / rounds(f"loop-{p}")[0]["line_events"] * 1e9
                for p in ["none", "memprof", "memlab", "line_profiler"]}
    bare = per_line["none"]
    added = {p: v - bare for p, v in per_line.items()}
    rows.append(("1. tight loop, every line traced: time per line", f"{bare:.0f} ns",
                 f"{per_line['memprof']:.0f} ns (+{added['memprof']:.0f} ns)",
                 f"{per_line['memlab'] / 1000:.0f} µs", f"{per_line['line_profiler']:.0f} ns (+{added['line_profiler']:.0f} ns)",
                 "≤ 1 µs added", check(added["memprof"] <= 1000, "case 1")))

cases = []
if want("resnet"):
    cases += [("resnet", "2. resnet50, batch 32, SGD step; `train_step` targeted", 1.02),
              ("bottleneck", "3. same step; `Bottleneck.forward` targeted", 1.05)]
if want("untargeted"):
    cases += [("untargeted", "4. 1M calls of untargeted code; a rare function targeted", 1.02)]
for case, label, target in cases:
    base = med(f"{case}-none")
    ratio = {p: med(f"{case}-{p}") / base for p in ["memprof", "memlab"]}
    rows.append((label, f"{base * 1e3:.1f} ms", f"{ratio['memprof']:.3f}x", f"{ratio['memlab']:.2f}x", "",
                 f"≤ {target}x", check(ratio["memprof"] <= target, f"case {label[0]}")))
    if case == "untargeted":
        for variant, text in [("unwind", "4a. diagnosis: plain python3 with one global PY_UNWIND monitor (memprof's only global event)"),
                              ("embedded", "4b. diagnosis: memprof with no target at all (the embedded interpreter alone)")]:
            rows.append((text, "", f"{med(f'{case}-{variant}') / base:.3f}x", "", "", "", ""))

section_rows = []
if want("modules"):
    base = med("modules-none")
    for case, label, what, baseline, name in [
        ("modules", "7. resnet50 step, every module's forward and backward measured", "`--modules`",
         "memtracker", "PyTorch's MemTracker (torch.distributed._tools), one tracked step at a time"),
        ("tensors", "8. resnet50 step, a live-tensor inventory after each step", "`-f train_step --tensors`",
         "memreporter", "pytorch_memlab's MemReporter(model).report() after each step"),
    ]:
        ours, theirs = med(f"{case}-memprof") / base, med(f"{case}-{baseline}") / base
        section_rows.append((label, f"{base * 1e3:.1f} ms", f"{what} {ours:.2f}x", f"{name}: {theirs:.2f}x"))

def ratio_rows(section, label, variants, note):
    """One row per variant: min, median and max over rounds of each round's ratio to the
    unprofiled step of the same round (`<section>-none`)."""
    base = [statistics.median(r["times"]) for r in rounds(f"{section}-none")]
    for variant, what in variants:
        ratios = sorted(statistics.median(r["times"]) / b
                        for r, b in zip(rounds(f"{section}-{variant}"), base))
        section_rows.append((label, f"{statistics.median(base) * 1e3:.1f} ms",
                             f"{what} {ratios[len(ratios) // 2]:.3f}x (min {ratios[0]:.3f}x, max {ratios[-1]:.3f}x)",
                             note))


if want("collectives"):
    ratio_rows("collectives", "9. resnet50 step (one process, no collectives issued)",
               [("memprof", "`-f train_step`"), ("on", "`-f train_step --collectives`")],
               "the callback's cost on every dispatched op")

if want("history"):
    ratio_rows("history", "10. resnet50 step: allocator history",
               [("torch", "PyTorch's `_record_memory_history(max_entries=100000)`, whole run"),
                ("memprof", "memprof `-f train_step`"),
                ("on", "memprof `-f train_step --history`"),
                ("calls", "memprof `-f train_step --warmup 5 --calls 3 --history`")],
               "stacks only inside the measured calls")

if want("startup"):
    with open(os.path.join(d, "startup.json")) as f:
        st = json.load(f)
    py_s, mp_s = statistics.median(st["python"]), statistics.median(st["memprof"])
    rows.append(("5. start-up: `import torch` and a first CUDA call", f"{py_s:.2f} s", f"{mp_s:.2f} s (+{mp_s - py_s:.2f} s)",
                 "", "", "≤ 0.3 s added", check(mp_s - py_s <= 0.3, "case 5")))

if want("resnet"):
    rn, rm = rounds("resnet-none")[-1], rounds("resnet-memprof")[-1]
    gpu_added = rm["gpu_used_bytes"] - rn["gpu_used_bytes"]
    same_reserved = rm["memory_reserved"] == rn["memory_reserved"] and rm["memory_allocated"] == rn["memory_allocated"]
    rows.append(("6. footprint after the resnet50 run: GPU memory added (`mem_get_info`), reserved and allocated bytes",
                 "", f"{gpu_added} B; reserved/allocated {'equal' if same_reserved else 'differ'}", "", "",
                 "0 B", check(gpu_added == 0 and same_reserved, "case 6")))
    rows.append(("6. footprint: host RSS added", f"{rn['rss_bytes'] / 2**20:.0f} MiB",
                 f"{(rm['rss_bytes'] - rn['rss_bytes']) / 2**20:+.1f} MiB", "", "", "", ""))

print("| case | no profiler | memprof | pytorch_memlab 0.3.2 | line_profiler 5.1 (time only) | target | met |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for row in rows:
    print("| " + " | ".join(row) + " |")
if section_rows:
    print()
    print("| case | no profiler | memprof | baseline |")
    print("| --- | --- | --- | --- |")
    for row in section_rows:
        print("| " + " | ".join(row) + " |")


def tagged(name, tag):
    with open(os.path.join(d, name + ".log")) as f:
        for line in f:
            if line.startswith(tag + " "):
                return json.loads(line[len(tag) + 1:])


if want("agree"):
    print()
    for kind in ["resnet", "gpt2"]:
        plain, under = tagged(f"agree-{kind}-plain", "READINGS"), tagged(f"agree-{kind}-memprof", "READINGS")
        with open(os.path.join(d, f"agree-{kind}.json")) as f:
            report = json.load(f)
        step = next(fn for fn in report["functions"] if fn["qualname"] == "train_step")
        ran = [l for l in step["lines"] if "stats" in l]
        max_peak = max(l["stats"]["allocated_bytes.all.peak"] for l in ran)
        delta_sum = sum(l["delta_bytes"] for l in ran)
        torch_peak = max(r["max_memory_allocated"] for r in plain)
        torch_delta = sum(r["memory_allocated_delta"] for r in plain)
        print(f"- {kind}: largest per-line allocated_bytes.all.peak {max_peak} = torch.cuda.max_memory_allocated() {torch_peak}: "
              f"{check(max_peak == torch_peak, kind + ' peak')}; sum of Δ {delta_sum} = change of memory_allocated() {torch_delta}: "
              f"{check(delta_sum == torch_delta, kind + ' delta')}; the program's readings identical with and without memprof: "
              f"{check(plain == under, kind + ' readings')}")
        under_memlab = tagged(f"agree-{kind}-memlab", "READINGS")
        print(f"  the program's readings under pytorch_memlab: {'identical' if under_memlab == plain else 'differ'} "
              f"(max_memory_allocated() after each call: {[r['max_memory_allocated'] for r in under_memlab]}, "
              f"unprofiled {[r['max_memory_allocated'] for r in plain]})")
        memlab = {int(k): v for k, v in (tagged(f"agree-{kind}-memlab", "MEMLAB") or {}).items()}
        print(f"  per-line allocated_bytes.all.peak (max over the {len(plain)} calls), memprof | pytorch_memlab:")
        for l in step["lines"]:
            ours, theirs = l.get("stats", {}).get("allocated_bytes.all.peak"), memlab.get(l["line"])
            if ours is None and theirs is None:
                continue
            mark = "same" if ours == theirs else "differs"
            print(f"    line {l['line']:>3}: {str(ours):>12} | {str(theirs):>12}  {mark:8} {l['source'].strip()[:60]}")
print()
print("ALL TARGETS MET" if not fails else "MISSED: " + ", ".join(fails))
