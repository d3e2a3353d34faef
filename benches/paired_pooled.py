"""A second look at benches/paired_cost.py's blocks on a noisy host: each variant's counted steps
pooled over every round of every process, against base's pooled the same way, at a few
quantiles (the lower decile, the lower quartile, the median), the rounds resampled for a 90%
interval (paired_table.py's).

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
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired_table import interval, rows  # noqa: E402

# Each quantile as the first cut of the steps into that many equal parts: the lower decile, the
# lower quartile, the median.
PARTS = (10, 4, 2)


def pooled_ratio(rounds, base, picks, parts):
    """The first of `parts`' cut points of the variant's steps in rounds `picks` over base's in
    the same rounds (interpolated between the nearest ranks)."""
    def cut(blocks):
        steps = [t for i in picks for t in blocks[i]]
        return statistics.quantiles(steps, n=parts, method="inclusive")[0]
    return cut(rounds) / cut(base)


def main(paths):
    processes = {}
    for row in rows(paths):
        processes.setdefault(row["case"], []).append(row)
    for case, procs in processes.items():
        # Every round of every process, each variant's blocks beside base's of the same round.
        variants = [v for v in procs[0]["blocks"] if v != "base"]
        rounds = {v: [b for p in procs for b in p["blocks"][v]] for v in variants + ["base"]}
        every_round = range(len(rounds["base"]))
        print(f"## {case}: {len(every_round)} rounds, steps pooled; ratio at each quantile "
              "[90% interval]")
        print("| variant | " + " | ".join(f"q{1 / parts:.2f}" for parts in PARTS) + " |")
        print("| --- |" + " --- |" * len(PARTS))
        for v in variants:
            cells = []
            for parts in PARTS:
                def ratio(picks):
                    return pooled_ratio(rounds[v], rounds["base"], picks, parts)
                low, high = interval(list(every_round), statistic=ratio)
                cells.append(f"{ratio(every_round):.3f}x [{low:.3f}, {high:.3f}]")
            print(f"| {v} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
