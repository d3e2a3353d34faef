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


def compare(case, what, ra, rb):
    """Prints how many of `rb`'s rows are `ra`'s, in order (and the first that are not): 0 when
    all are, else 1."""
    same = sum(x == y for x, y in zip(ra, rb))
    print(f"{case}: {len(rb)} {what}; {same} the same as before's"
          + ("" if same == len(ra) == len(rb) else "; first differences: "
             + "; ".join(f"{x} -> {y}" for x, y in zip(ra, rb) if x != y)[:600]))
    return 0 if same == len(ra) == len(rb) else 1


def main():
    case, before, after = sys.argv[1:4]
    return compare(case, "module rows (calls, peak, saved bytes)", rows(before), rows(after))


if __name__ == "__main__":
    sys.exit(main())
