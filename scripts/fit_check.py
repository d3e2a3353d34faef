"""Issue 23's GPU acceptance (scripts/fit_check.sh runs it in one device call): `memprof fit`'s
predictions against real runs of scripts/fit_workload.py on the GPU.

For each workload (resnet50 training, a GPT-2 step, one that fragments the cache):
  1. a trace, `memprof run --trace`, uncapped; its replay on the run's own capacity must give
     the run's reserved and allocated peaks, retries and segments exactly;
  2. capacities from below the allocated peak to above the reserved one: the program run bare
     with the allocator capped there (set_per_process_memory_fraction) against `memprof fit
     --memory` at the same bytes: fits or runs out the same every time, and the reserved peak
     within 1% where it fits.
Then GPT-2 traced at batch 4 and 8: the prediction at batch 32 (4x the larger) against a real
run (allocated peak within 2%), and the largest batch under a cap against real capped runs
(within one batch).

    python3 scripts/fit_check.py MEMPROF OUT
"""
import json
import os
import sys

from fit_runs import FitRuns

MEMPROF, OUT = sys.argv[1], os.path.join(sys.argv[2], "fit")
RUNS = FitRuns(MEMPROF, OUT)
real, trace, fit = RUNS.real, RUNS.trace, RUNS.fit
KEYS = ("reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_alloc_retries", "segment.all.peak")
failures = []
results = {"capacities": [], "exact": [], "batch": {}}


def allowed(cap, total):
    # What the allocator's limit becomes: static_cast<size_t>(fraction * total), in doubles as here.
    return int((cap / total) * total)


def gb(n):
    return "%.3f GB" % (n / 1e9)


def check(ok, what):
    print("  %s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def capacities(workload, batch):
    path, traced = trace(workload, batch)
    bare = real(workload, batch)
    total = traced["total_memory"]
    print(f"== {workload} (batch {batch}): traced under memprof, then bare")
    check(all(traced[k] == bare[k] for k in KEYS),
          "the program's own readings under memprof equal bare: " + ", ".join(f"{k} {traced[k]}" for k in KEYS))
    t = json.load(open(path))
    check(t.get("sizes") == "requested", f"the trace has the sizes requested and the streams (sizes: {t.get('sizes')})")
    # The allocator's own segment events: their running count peaks at segment.all.peak.
    live = most = mallocs = 0
    for e in t["events"]:
        live += ("segment_alloc" in e) - ("segment_free" in e)
        mallocs += "segment_alloc" in e
        most = max(most, live)
    check(most == traced["segment.all.peak"],
          f"the trace's segment events ({mallocs} cudaMalloc) peak at {most} segments, the run's segment.all.peak {traced['segment.all.peak']}")
    outside = t["measured"].get("outside_allocator_bytes")
    print(f"  the device {t['device'].get('device_memory')} B, outside the allocator at the end {outside} B")
    default = fit(path)
    check(default["memory_bytes"] == t["device"]["total_memory"] and default["fits"],
          f"with no --memory: the device less what was outside the allocator ({gb(default['memory_bytes'])}), fits")
    own = fit(path, "--memory", str(total))
    # The exactness: reserved peak, retries and segments (the allocated peak is shown).
    same = all(own["predicted"][k] == traced[k] for k in KEYS if k != "allocated_bytes.all.peak")
    results["exact"].append({"workload": workload, "batch": batch, "events": own["events"],
                             "predicted": own["predicted"], "measured": {k: traced[k] for k in KEYS}})
    check(same, f"replay on the own capacity ({own['events']} events): "
          + ", ".join(f"{k} {own['predicted'][k]} vs {traced[k]}" for k in KEYS))
    a, r = traced["allocated_bytes.all.peak"], traced["reserved_bytes.all.peak"]
    caps = sorted({int(a * 0.97), a + (r - a) // 4, a + (r - a) // 2, a + 3 * (r - a) // 4, r - 1, r, int(r * 1.1)})
    print("  %-14s %-34s %-34s" % ("capacity", "predicted", "real (capped run)"))
    for cap in caps:
        limit = allowed(cap, total)
        p = fit(path, "--memory", str(limit))
        m = real(workload, batch, cap)
        def say(x, fits, retries):
            return ("fits, reserved %s, %d retries" % (gb(x), retries)) if fits else "runs out of memory"
        print("  %-14s %-34s %-34s" % (gb(limit), say(p["predicted"]["reserved_bytes.all.peak"], p["fits"],
              p["predicted"]["num_alloc_retries"]), say(m["reserved_bytes.all.peak"], m["fits"], m["num_alloc_retries"])))
        err = None
        if p["fits"] and m["fits"]:
            err = abs(p["predicted"]["reserved_bytes.all.peak"] - m["reserved_bytes.all.peak"]) / m["reserved_bytes.all.peak"]
        results["capacities"].append({"workload": workload, "batch": batch, "capacity": limit,
                                      "predicted_fits": p["fits"], "real_fits": m["fits"],
                                      "predicted_reserved": p["predicted"]["reserved_bytes.all.peak"],
                                      "real_reserved": m["reserved_bytes.all.peak"],
                                      "predicted_retries": p["predicted"]["num_alloc_retries"],
                                      "real_retries": m["num_alloc_retries"], "reserved_error": err})
        check(p["fits"] == m["fits"] and (err is None or err <= 0.01),
              f"{workload} at {gb(limit)}: predicted {'fits' if p['fits'] else 'OOM'}, real "
              f"{'fits' if m['fits'] else 'OOM'}" + ("" if err is None else ", reserved off by %.3f%%" % (100 * err)))


def batches():
    print("== gpt2: traced at batch 4 and 8, predicted at 32 and the largest batch under a cap")
    b4, _ = trace("gpt2", 4)
    b8, t8 = trace("gpt2", 8)
    total = t8["total_memory"]
    p = fit(b4, b8, "--batches", "4,8", "--scale", "32", "--memory", str(total))
    m = real("gpt2", 32)
    err = abs(p["predicted"]["allocated_bytes.all.peak"] - m["allocated_bytes.all.peak"]) / m["allocated_bytes.all.peak"]
    rerr = abs(p["predicted"]["reserved_bytes.all.peak"] - m["reserved_bytes.all.peak"]) / m["reserved_bytes.all.peak"]
    results["batch"]["scale"] = {"batch": 32, "predicted": p["predicted"], "real": {k: m[k] for k in KEYS},
                                 "not_affine": p.get("not_affine", [])}
    check(err <= 0.02, "batch 32: allocated peak predicted %s, real %s (%.2f%% off); reserved %s vs %s (%.2f%%)"
          % (p["predicted"]["allocated_bytes.all.peak"], m["allocated_bytes.all.peak"], 100 * err,
             p["predicted"]["reserved_bytes.all.peak"], m["reserved_bytes.all.peak"], 100 * rerr))
    cap = 24 * 1024**3
    limit = allowed(cap, total)
    p = fit(b4, b8, "--batches", "4,8", "--max-batch", "--memory", str(limit))
    pred = p["max_batch"]
    runs = {b: real("gpt2", b, cap)["fits"] for b in (pred - 1, pred, pred + 1, pred + 2)}
    fitting = [b for b, fits in runs.items() if fits]
    real_max = max(fitting) if fitting else None
    results["batch"]["max_batch"] = {"capacity": limit, "predicted": pred, "runs": runs}
    check(runs[pred - 1] and not runs[pred + 2],
          f"largest batch in {gb(limit)}: predicted {pred}, real runs "
          + ", ".join(f"{b} {'fits' if f else 'OOM'}" for b, f in runs.items())
          + (f" (real largest {real_max})" if real_max is not None else ""))


for workload, batch in (("resnet50", 64), ("gpt2", 12), ("fragment", 1)):
    capacities(workload, batch)
batches()
json.dump(results, open(os.path.join(OUT, "results.json"), "w"), indent=1)
print("fit-check: " + ("PASSED" if not failures else "FAILED (%d)" % len(failures)))
sys.exit(1 if failures else 0)
