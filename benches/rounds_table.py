"""The table of a benchmark's interleaved rounds (benches/peak_cost.sh, benches/compiled_cost.sh):
each variant's median step time per round, and its ratio to python3's in the same round.

    python3 benches/rounds_table.py OUT_DIR "CASE=LABEL[;...]" "VARIANT=LABEL[;...]"

reads OUT_DIR/CASE-VARIANT.txt (one `BENCH {"times": [...]}` line per round); the first variant
is the baseline.
"""
import json
import os
import statistics
import sys


def medians(out, name):
    path = os.path.join(out, name + ".txt")
    rows = [json.loads(l.split("BENCH ", 1)[1]) for l in open(path)] if os.path.exists(path) else []
    return [statistics.median(r["times"]) * 1e3 for r in rows]


def pairs(arg):
    return [tuple(p.split("=", 1)) for p in arg.split(";")]


out, cases, variants = sys.argv[1], pairs(sys.argv[2]), pairs(sys.argv[3])
print("| step | variant | ms per step: min / median / max over rounds | ratio to python3 per round: median (min, max) |")
print("| --- | --- | --- | --- |")
for case, label in cases:
    base = medians(out, f"{case}-{variants[0][0]}")
    if not base:
        continue
    for variant, name in variants:
        v = medians(out, f"{case}-{variant}")
        if not v:
            print(f"| {label} | {name} | failed | |")
            continue
        r = [a / b for a, b in zip(v, base)]
        print(f"| {label} | {name} | {min(v):.2f} / {statistics.median(v):.2f} / {max(v):.2f} ms | "
              f"{statistics.median(r):.3f}x ({min(r):.3f}, {max(r):.3f}) |")
