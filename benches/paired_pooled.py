"""A second look at benches/paired_cost.py's blocks on a noisy host: each variant's counted steps
pooled over every round of every process, against base's pooled the same way, at a few
quantiles, the rounds resampled for a 90% interval (2000 draws, seeded).

    python3 benches/paired_pooled.py FILE...   # files holding paired_cost.py's BENCH lines

Why beside the table (benches/paired_table.py, issue 53's method: per round, a block's median
step over base's, then the median of those ratios): where a shared host's bursts slow whole
stretches of steps, the two estimators can disagree by more than a goal's margin (the
twenty-seventh session's H100: resnet50 `--modules` 1.006x by the table, 1.047x by the pooled
median), and the lower quantiles show what memprof's work costs the steps no burst reached (a
burst only adds time). The table's verdict stays the method's; this says how far it leans on
the host.
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired_table import rows  # noqa: E402

QUANTILES = (0.1, 0.25, 0.5)
DRAWS = 2000


def quantile(values, q):
    """The q-quantile of `values`, interpolated between the two nearest ranks."""
    values = sorted(values)
    at = (len(values) - 1) * q
    low = int(at)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (at - low)


def pooled_ratio(rounds, base, picks, q):
    """The q-quantile of the variant's steps in rounds `picks` over base's in the same rounds."""
    steps = [t for i in picks for t in rounds[i]]
    base_steps = [t for i in picks for t in base[i]]
    return quantile(steps, q) / quantile(base_steps, q)


def main(paths):
    processes = {}
    for row in rows(paths):
        processes.setdefault(row["case"], []).append(row)
    rng = random.Random(0)
    for case, procs in processes.items():
        # Every round of every process, each variant's blocks beside base's of the same round.
        variants = [v for v in procs[0]["blocks"] if v != "base"]
        rounds = {v: [b for p in procs for b in p["blocks"][v]] for v in variants + ["base"]}
        n = len(rounds["base"])
        print(f"## {case}: {n} rounds, steps pooled; ratio at each quantile [90% interval]")
        print("| variant | " + " | ".join(f"q{q:.2f}" for q in QUANTILES) + " |")
        print("| --- |" + " --- |" * len(QUANTILES))
        for v in variants:
            cells = []
            for q in QUANTILES:
                everything = pooled_ratio(rounds[v], rounds["base"], range(n), q)
                draws = sorted(
                    pooled_ratio(rounds[v], rounds["base"], [rng.randrange(n) for _ in range(n)], q)
                    for _ in range(DRAWS))
                cells.append(f"{everything:.3f}x [{draws[DRAWS // 20]:.3f}, "
                             f"{draws[DRAWS - 1 - DRAWS // 20]:.3f}]")
            print(f"| {v} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
