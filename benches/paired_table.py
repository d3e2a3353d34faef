"""The table of benches/paired_cost.py's processes (issue 53's in-process method).

    python3 benches/paired_table.py FILE...   # files holding paired_cost.py's BENCH lines

Per round of a process, each variant's ratio: the median of its block's steps over the median of
the `base` block's in the same round (seconds apart, in the same process). The table gives, per
case and variant, the median of those ratios over every round of every process, its 90% interval
from resampling the rounds (2000 draws, seeded), their min and max, the per-process medians'
range, and the goal (issues 50 and 53); `control` (a second unprofiled block) is the noise floor.
"""
import json
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The steps' names and the goals (issues 50 and 53) are the process-level table's.
from modes_table import CASES, GOALS  # noqa: E402

LABELS = {"control": "unprofiled again (the noise floor)",
          "none": "memprof.profile() (no flags)",
          "f": "memprof.profile(STEP) (-f)",
          "modules": "memprof.profile(modules=True) (--modules)",
          "modules_hooks": "--modules, saved-tensors hooks in C++ (MEMPROF_SAVED_HOOKS=hooks)",
          "modules_python": "--modules, saved-tensors hooks in Python (MEMPROF_SAVED_HOOKS=python)",
          "tensors": "memprof.profile(STEP, tensors=True) (--tensors)",
          "history": "memprof.profile(STEP, history=FILE) (-f STEP --history)",
          "history_calls": "memprof.profile(STEP, history=FILE, calls=1) (--history --calls 1: "
                           "the steps after the recorded one)",
          "wrapper": "floor: Module._call_impl wrapped in Python, nothing else (no memprof)",
          "wrapper_calls": "floor: that wrapper calling a C function twice per call (no memprof)",
          "torch_history": "floor: torch's own history, stacks on every event (no memprof)",
          "torch_history_alloc": "floor: torch's own history, stacks on allocations (no memprof)",
          "torch_history_nostack": "floor: torch's own history, no stacks (no memprof)"}


def rows(paths):
    for path in paths:
        for line in open(path):
            if line.startswith("BENCH "):
                yield json.loads(line[len("BENCH "):])


def round_ratios(process, variant, key="blocks"):
    """Per round: the median step of `variant`'s block over the `base` block's (`key`:
    host_blocks, the launching thread's part of each step)."""
    blocks, base = process[key][variant], process[key]["base"]
    return [statistics.median(v) / statistics.median(b) for v, b in zip(blocks, base) if v and b]


def launching(processes, variant):
    """The launching thread's part of the step (until its Python returned, before waiting for
    the GPU): ms unprofiled, and the ratio per round, median [90% interval]; where the GPU is
    the bottleneck the whole step hides memprof's work, and this shows it."""
    if not all("host_blocks" in p for p in processes):
        return "not measured"
    base = [statistics.median(b) * 1e3 for p in processes for b in p["host_blocks"]["base"] if b]
    ratios = [r for p in processes for r in round_ratios(p, variant, "host_blocks")]
    if not ratios or not base:
        return ""
    low, high = interval(ratios)
    ratio = statistics.median(ratios)
    return f"{statistics.median(base):.2f}, {ratio:.3f}x [{low:.3f}, {high:.3f}]"


def interval(values, resamples=2000, statistic=statistics.median):
    """The 90% interval of `statistic` over `values` resampled with replacement (seeded)."""
    rng = random.Random(53)
    draws = sorted(statistic(rng.choices(values, k=len(values))) for _ in range(resamples))
    return draws[resamples // 20], draws[resamples - 1 - resamples // 20]


def main():
    processes = list(rows(sys.argv[1:]))
    print("| step | variant | ms per step, unprofiled blocks: median (min, max) "
          "| ratio per round: median [90% interval] (min, max) | per-process medians: min, max "
          "| rounds | goal | the launching thread's part: ms unprofiled, ratio median [90%] |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    missed = []
    for case in dict.fromkeys(p["case"] for p in processes):
        mine = [p for p in processes if p["case"] == case]
        base = [statistics.median(b) * 1e3 for p in mine for b in p["blocks"]["base"] if b]
        variants = [v for v in mine[0]["blocks"] if v != "base"]
        for v in variants:
            per_process = [round_ratios(p, v) for p in mine]
            all_rounds = [r for rs in per_process for r in rs]
            if not all_rounds:
                continue
            ratio = statistics.median(all_rounds)
            low, high = interval(all_rounds)
            medians = [statistics.median(rs) for rs in per_process if rs]
            goal = GOALS.get((case, v), GOALS.get(v))
            verdict = "the noise floor" if v == "control" else ""
            if goal:
                met = ratio <= goal
                sure = high <= goal if met else low > goal
                verdict = f"≤{goal:.2f}x: {'met' if met else 'MISSED'}" + \
                    ("" if sure else " (within its interval)")
                if not met:
                    missed.append(f"{case} {v}")
            ms = f"{statistics.median(base):.2f} ({min(base):.2f}, {max(base):.2f})"
            print(f"| {CASES.get(case, case)} | {LABELS.get(v, v)} | {ms} "
                  f"| {ratio:.3f}x [{low:.3f}, {high:.3f}] ({min(all_rounds):.3f}x, {max(all_rounds):.3f}x) "
                  f"| {min(medians):.3f}x, {max(medians):.3f}x | {len(all_rounds)} | {verdict} "
                  f"| {launching(mine, v)} |")
    print()
    leads = sorted({p.get("lead", 0) for p in processes})
    if leads != [0]:
        print("each block measured after %s uncounted steps of its session (--lead)"
              % "/".join(map(str, leads)))
    print("goals: " + ("all met" if not missed else "missed: " + ", ".join(missed)))


if __name__ == "__main__":
    main()
