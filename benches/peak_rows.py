"""Whether two reports have the same peak: its allocated, reserved and unseen bytes, and every
site row (file, line, function, bytes, blocks, categories) in order: what a change to how the
tracker records its events must keep exactly. Used by benches/modules_rows.sh.

    python3 benches/peak_rows.py CASE BEFORE.json AFTER.json
"""
import json
import sys

from modules_rows import compare


def rows(path):
    peak = json.load(open(path))["peak"]
    head = [("allocated", peak["allocated_bytes"]), ("reserved", peak["reserved_bytes"]),
            ("unseen", peak["unseen_bytes"])]
    sites = [(s["file"], s["line"], s["function"], s["bytes"], s["blocks"],
              json.dumps(s.get("categories"), sort_keys=True)) for s in peak["sites"]]
    return head + sites


def main():
    case, before, after = sys.argv[1:4]
    return compare(case, "rows of the peak (its bytes, then its sites)", rows(before), rows(after))


if __name__ == "__main__":
    sys.exit(main())
