"""Function by function, what one mode's callgrind dump counts over another's, per unit of work:
the rows benches/counted.sh prints, taken apart (which functions' instructions and cache misses a
change moved). Each function's own counts (its callees' not included), summed over the dump.

    python3 benches/counted_functions.py MODE_DUMP BASE_DUMP UNITS [EVENT [TOP]]

EVENT (default DLmr: lines read from memory) orders the functions; TOP (default 30) of them are
printed. The dumps must be written with --compress-strings=no (benches/counted.sh passes it when
FUNCTIONS is set): a compressed dump names each function once, in the file of the part that met
it first, so a later part's functions would go unnamed. (callgrind_annotate put every count of
such a part under __libc_start_main on this machine, names in full or not.)"""
import collections
import sys

SHOWN = ["Ir", "D1mr", "D1mw", "DLmr", "DLmw"]


def own_counts(path):
    """{(function, event): count} of the function's own cost lines, and the dump's events."""
    counts = collections.Counter()
    events, function, inclusive_next = [], None, False
    for line in open(path, errors="replace"):
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("fn="):
            function = line[3:].strip()
        elif line.startswith("calls="):
            inclusive_next = True  # the next cost line is a call's, its callee's cost inclusive
        elif line[:1].isdigit() or line[:1] in "+-*":
            if inclusive_next:
                inclusive_next = False
                continue
            for event, n in zip(events, line.split()[1:]):
                counts[(function, event)] += int(n)
    return counts, events


def table(mode_dump, base_dump, units, order="DLmr", top=30):
    """Prints the TOP functions by ORDER: (mode - base) / units, event by event."""
    mode, events = own_counts(mode_dump)
    base, _ = own_counts(base_dump)
    if order not in events:
        sys.exit(f"counted_functions: no event {order} in {mode_dump} (it has {' '.join(events)})")
    functions = {f for f, _ in mode} | {f for f, _ in base}
    rows = sorted(((mode[(f, order)] - base[(f, order)]) / units, f) for f in functions)[::-1]
    shown = [e for e in SHOWN if e in events]
    print("".join("%10s" % e for e in shown) + "  function (own counts, ordered by %s)" % order)
    for _, f in rows[:top]:
        print("".join("%10.1f" % ((mode[(f, e)] - base[(f, e)]) / units) for e in shown)
              + "  " + f[:140])


if __name__ == "__main__":
    table(sys.argv[1], sys.argv[2], float(sys.argv[3]), *sys.argv[4:5],
          *map(int, sys.argv[5:6]))
