"""Writes N rank reports made from one real report, for `memprof merge` at scale (tests/merge_scale.rs,
benches/merge_scale.sh): rank r of N on host `node{r // PER_HOST:03}`, its peak (and its largest
site, and each measured line's stats) moved by a known amount, so that the merged numbers are known:

    python3 benches/synthetic_ranks.py TEMPLATE.json OUT_DIR [--ranks 1024] [--per-host 8]

- every rank: +(r * 7919 % 1000) * 64 bytes (a spread of up to 62.4 KiB, no two neighbours alike);
- rank HIGH (N // 2 + 1, e.g. 513): +25% of the template's peak (far above the rest);
- rank LOW (17, or N - 1 when fewer): -20% of the template's peak (far below);
- rank EXCEPTION (N - 3 when N >= 8): outcome `exception`.

Prints one JSON line: the ranks chosen, and each rank's peak allocated bytes, for the test to check
the merged distribution against. The reports keep the template's timeline, so each is as large as
a real one (the template's size).
"""
import argparse
import json
import os


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("template")
    parser.add_argument("out_dir")
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--per-host", type=int, default=8)
    args = parser.parse_args()
    with open(args.template) as f:
        template = json.load(f)
    # The timeline, the bulk of a report, is the same in every rank's: written once as text.
    timeline = json.dumps(template.pop("timeline", None))
    text = json.dumps(template)
    n = args.ranks
    base = template["peak"]["allocated_bytes"]
    high, low = n // 2 + 1, 17 if n > 17 else n - 1
    exception = n - 3 if n >= 8 else None
    os.makedirs(args.out_dir, exist_ok=True)
    peaks = []
    for r in range(n):
        extra = (r * 7919 % 1000) * 64
        if r == high:
            extra += base // 4
        elif r == low:
            extra -= base // 5
        report = json.loads(text)
        md = report["metadata"]
        md["process"].update(
            rank=r, local_rank=r % args.per_host, world_size=n,
            host=f"node{r // args.per_host:03}", pid=10000 + r,
        )
        if r == exception:
            md["outcome"]["status"] = "exception"
        peak = report["peak"]
        peak["allocated_bytes"] += extra
        peak["reserved_bytes"] += extra
        peak["sites"][0]["bytes"] += extra
        for function in report["functions"]:
            if function.get("peak_allocated_bytes") is not None:
                function["peak_allocated_bytes"] += extra
            for line in function["lines"]:
                for key in line.get("stats", {}):
                    if key.startswith("allocated_bytes"):
                        line["stats"][key] += extra
        peaks.append(peak["allocated_bytes"])
        report["timeline"] = None
        with open(os.path.join(args.out_dir, f"r.{r}.json"), "w") as f:
            f.write(json.dumps(report)[:-len('null}')] + timeline + "}")
    print(json.dumps({"high": high, "low": low, "exception": exception, "peaks": peaks}))


if __name__ == "__main__":
    main()
