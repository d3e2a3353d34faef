"""Where a mode's cost goes, with the hosts' noise cancelled: a `perf record` of one
benches/paired_cost.py process (its blocks of steps under each variant alternating, seconds
apart), each sample given to the block whose step was running when it was taken (the BENCH
line's `spans`, monotonic-clock nanoseconds, as `perf record -k CLOCK_MONOTONIC` stamps
samples). A variant's CPU time per step, library by library and function by function, is then
compared with the unprofiled blocks' (`base`) of the same process, and the `control` blocks'
(also unprofiled) difference from `base` is printed beside as the noise floor.

    python3 benches/paired_profile.py BENCH_LOG SCRIPT_TXT HZ [--top 30] [--against base]

SCRIPT_TXT: `perf script -F comm,pid,tid,time,ip,sym,dso --ns` of the record. Threads: `main`
(the one that runs the steps), `autograd` (torch's device threads, `pt_autograd_*`), `other`.
benches/paired_profile.sh runs it all on the GPU machine.
"""
import argparse
import bisect
import collections
import json
import re

LINE = re.compile(r"^\s*(.*?)\s+(\d+)/(\d+)\s+(\d+)\.(\d+):\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def thread_of(comm, pid, tid):
    if pid == tid:
        return "main"
    return "autograd" if comm.startswith("pt_autograd") else "other"


def short(dso):
    return dso.rsplit("/", 1)[-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bench_log")
    p.add_argument("script_txt")
    p.add_argument("hz", type=float)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--against", default="base",
                   help="the variant each other is compared with (default base, unprofiled)")
    args = p.parse_args()
    bench = None
    with open(args.bench_log) as f:
        for line in f:
            if line.startswith("BENCH "):
                bench = json.loads(line[6:])
    if bench is None or "spans" not in bench:
        raise SystemExit("paired_profile: no BENCH line with spans (run paired_cost.py --spans)")
    spans = sorted((s, e, v) for v, ss in bench["spans"].items() for s, e in ss)
    starts = [s for s, _, _ in spans]
    steps = {v: len(ss) for v, ss in bench["spans"].items()}
    by_sym = collections.defaultdict(collections.Counter)
    by_dso = collections.defaultdict(collections.Counter)
    by_thread = collections.defaultdict(collections.Counter)
    unparsed = 0
    with open(args.script_txt, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                unparsed += 1
                continue
            comm, pid, tid, sec, nsec, sym, dso = m.groups()
            t = int(sec) * 1_000_000_000 + int(nsec.ljust(9, "0")[:9])
            i = bisect.bisect_right(starts, t) - 1
            if i < 0 or t > spans[i][1]:
                continue
            v = spans[i][2]
            thread = thread_of(comm, pid, tid)
            dso = short(dso)
            by_thread[v][thread] += 1
            by_dso[v][(thread, dso)] += 1
            by_sym[v][(thread, dso, sym)] += 1
    ms = 1000.0 / args.hz  # one sample's milliseconds

    def per_step(counter, v, key):
        return counter[v][key] * ms / max(steps[v], 1)

    ref = args.against
    variants = [v for v in bench["spans"] if v not in ("base", "control", ref)]
    print(f"samples at {args.hz:g} Hz; steps per variant: {steps}; unparsed lines {unparsed}")
    print("\nCPU ms per step by thread (all samples inside the steps' launching parts):")
    threads = ("main", "autograd", "other")
    print("| variant | " + " | ".join(threads) + " | all |")
    print("| --- | " + " | ".join("---" for _ in threads) + " | --- |")
    for v in ["base", "control"] + ([ref] if ref != "base" else []) + variants:
        cells = [per_step(by_thread, v, t) for t in threads]
        print(f"| {v} | " + " | ".join(f"{c:.3f}" for c in cells) + f" | {sum(cells):.3f} |")
    for v in variants:
        for title, counter, width in (("library", by_dso, 0), ("function", by_sym, args.top)):
            keys = set(counter[v]) | set(counter[ref])
            rows = sorted(keys, key=lambda k: per_step(counter, ref, k) - per_step(counter, v, k))
            rows = rows[:width or 15]
            print(f"\n{v} over {ref}, ms per step by thread and {title} (control - base beside):")
            print("| thread | " + ("library" if title == "library" else "library | function")
                  + f" | {ref} | {v} | diff | control diff |")
            print("| --- | --- |" + (" --- |" if title == "function" else "")
                  + " --- | --- | --- | --- |")
            for k in rows:
                b, x, c, b0 = (per_step(counter, w, k) for w in (ref, v, "control", "base"))
                name = " | ".join(str(part)[:90] for part in k)
                print(f"| {name} | {b:.3f} | {x:.3f} | {x - b:+.3f} | {c - b0:+.3f} |")


if __name__ == "__main__":
    main()
