"""Whether two `--modules` reports have the same module rows (root, module, phase, calls, peak,
saved bytes), row by row: what a change to how `--modules` measures must keep. Used by
benches/modules_cost.sh (binaries) and benches/modules_rows.sh (wheels).

    python3 benches/modules_rows.py CASE BEFORE.json AFTER.json
"""
import json
import sys


def rows(path):
    return [(e["root"], e["module"], e["phase"], e["calls"], e["peak_bytes"], e.get("saved_bytes"))
            for e in json.load(open(path))["modules"]["modules"]]


def main():
    case, before, after = sys.argv[1:4]
    ra, rb = rows(before), rows(after)
    same = sum(x == y for x, y in zip(ra, rb))
    print(f"{case}: {len(rb)} module rows; {same} the same as before's (calls, peak, saved bytes)"
          + ("" if same == len(ra) == len(rb) else "; first differences: "
             + "; ".join(f"{x} -> {y}" for x, y in zip(ra, rb) if x != y)[:600]))
    return 0 if same == len(ra) == len(rb) else 1


if __name__ == "__main__":
    sys.exit(main())
