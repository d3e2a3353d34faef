"""Whether two reports have the same peak: its allocated and reserved bytes, and every site row
(file, line, function, bytes, blocks, categories) in order: what a change to how the tracker records its
events must keep exactly. Used by benches/modules_rows.sh.

    python3 benches/peak_rows.py CASE BEFORE.json AFTER.json
"""
import json
import sys


def rows(path):
    peak = json.load(open(path))["peak"]
    head = [("allocated", peak["allocated_bytes"]), ("reserved", peak["reserved_bytes"]),
            ("unseen", peak["unseen_bytes"])]
    sites = [(s["file"], s["line"], s["function"], s["bytes"], s["blocks"],
              json.dumps(s.get("categories"), sort_keys=True)) for s in peak["sites"]]
    return head + sites


def main():
    case, before, after = sys.argv[1:4]
    ra, rb = rows(before), rows(after)
    same = sum(x == y for x, y in zip(ra, rb))
    print(f"{case}: the peak's {len(rb)} rows (bytes, then sites); {same} the same as before's"
          + ("" if same == len(ra) == len(rb) else "; first differences: "
             + "; ".join(f"{x} -> {y}" for x, y in zip(ra, rb) if x != y)[:600]))
    return 0 if same == len(ra) == len(rb) else 1


if __name__ == "__main__":
    sys.exit(main())
