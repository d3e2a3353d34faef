"""Summarises benches/overhead.sh: per case and variant, min / median / max over rounds of the
per-process medians, and each round's ratio to plain python3 of the same round (median, min,
max). Start-up: min / median / max of whole-process seconds and the added median."""
import json
import os
import statistics
import sys

out, part = sys.argv[1], sys.argv[2]


def medians(name):
    path = os.path.join(out, name + ".txt")
    if not os.path.exists(path):
        return []
    rows = [json.loads(line.split("BENCH ", 1)[1]) for line in open(path)]
    return [statistics.median(r["times"]) * 1e3 for r in rows]


def spread(v, unit, digits):
    return f"{min(v):.{digits}f} / {statistics.median(v):.{digits}f} / {max(v):.{digits}f} {unit}"


CASES = [
    ("untargeted", "Python-heavy code (200k small calls per repeat), `-f rare` (called once)"),
    ("bare", "the same, memprof with no target"),
    ("resnet", "resnet50 batch-32 SGD step, `-f train_step`"),
    ("modules", "resnet50 step, `--modules`, no `-f`"),
]
if part == "steady":
    print("| case | variant | ms per repeat: min / median / max over rounds | ratio to python3 per round: median (min, max) |")
    print("| --- | --- | --- | --- |")
    for case, label in CASES:
        base = medians(f"{case}-python")
        if not base:
            continue
        print(f"| {label} | python3 | {spread(base, 'ms', 2)} | 1.000x |")
        for variant in ("floor", "floorsaved", "before", "after"):
            v = medians(f"{case}-{variant}")
            if variant.startswith("floor") and not v:
                continue
            if len(v) != len(base):
                print(f"| {label} | {variant} | {len(v)} of {len(base)} rounds ran | |")
                continue
            r = sorted(a / b for a, b in zip(v, base))
            name = {"floor": "python3 + no-op module hooks",
                    "floorsaved": "python3 + no-op module and saved-tensors hooks"}.get(
                        variant, f"memprof {variant}")
            print(f"| {label} | {name} | {spread(v, 'ms', 2)} | "
                  f"{statistics.median(r):.3f}x ({r[0]:.3f}x, {r[-1]:.3f}x) |")
elif part == "startup":
    st = json.load(open(os.path.join(out, "startup.json")))
    base = statistics.median(st["python"])
    print("| start-up: `import torch`, one CUDA call, exit | s: min / median / max | median added |")
    print("| --- | --- | --- |")
    for name, v in st.items():
        label = "python3" if name == "python" else f"memprof {name}"
        print(f"| {label} ({len(v)} runs) | {spread(v, 's', 3)} | {statistics.median(v) - base:+.3f} s |")
