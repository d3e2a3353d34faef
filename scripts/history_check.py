"""The GPU check of --history, run by scripts/gpu-check.sh on the GPU machine: memprof profiles
examples/train.py's train_step on cuda:0 with --history; the file must load with pickle and in
torch.cuda._memory_viz (trace_plot, segment_plot, trace, segsum), its events inside the measured
calls must carry memprof's line (first frame and user_metadata), and its largest live total while
those calls run, replayed from the events as memory_viz replays them, must equal train_step's
requested_bytes.all.peak: torch's trace entries carry requested sizes, the bytes memory_viz
draws; allocated_bytes counts the allocator's blocks, rounded up to 512 B (and kept whole when
the rest is too small to split), so the allocated peak is shown beside it.

    python3 scripts/history_check.py MEMPROF_BINARY OUT_DIR
"""
import json
import os
import pickle
import subprocess
import sys

from torch.cuda import _memory_viz as mv

memprof, out = sys.argv[1], sys.argv[2]
root = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
history = os.path.join(out, "train_history.pickle")
report_path = os.path.join(out, "history_train.json")
run = subprocess.run(
    [memprof, "run", "-f", "train_step", "--history", history, "--format", "json",
     "--stat", "requested_bytes.all.peak,allocated_bytes.all.peak",
     "-o", report_path, os.path.join(root, "examples", "train.py"), "--steps", "3"],
    capture_output=True, text=True,
)
print(run.stderr[-2000:])
failures = []


def check(ok, what, detail=""):
    print("%s   %s %s" % ("ok" if ok else "FAIL", what, detail))
    if not ok:
        failures.append(what)


check(run.returncode == 0, "memprof ran (exit 0)", run.returncode)
report = json.load(open(report_path))
data = pickle.load(open(history, "rb"))
f = next(f for f in report["functions"] if f["qualname"] == "train_step")
peak = f["peak_allocated_bytes"]
requested_peak = max(l["stats"].get("requested_bytes.all.peak", 0) for l in f["lines"] if l["hits"])

check(mv.trace_plot(data).lstrip().startswith("<!DOCTYPE html>"), "trace_plot builds the viewer's page")
check("<script" in mv.segment_plot(data), "segment_plot builds the viewer's page")
check(len(mv.trace(data)) > 0 and "Summary of segments" in mv.segsum(data), "trace and segsum walk it")

dev = report["metadata"]["device"]["index"]
trace = data["device_traces"][dev]
ours = [e for e in trace if e["frames"] and e["frames"][0]["filename"] == "memprof"
        and e["frames"][0]["line"] > 0]
inside = {id(e) for e in ours}
check(len(ours) > 0 and all(e.get("user_metadata", "").startswith("memprof: train_step line ")
                            for e in ours),
      "events in the measured calls carry memprof's line", len(ours))
lines = {e["frames"][0]["line"] for e in ours}
check(lines <= set(range(28, 34)) and 31 in lines, "their lines are train_step's", sorted(lines))
check(report["history"]["events"] == sum(len(t) for t in data["device_traces"]),
      "the report counts the file's events", report["history"])

# memory_viz's replay (process_alloc_data): blocks alive before the first event (freed without
# an alloc, or active in the final snapshot without one) start the total.
allocated_in_trace, total, initial = set(), 0, 0
for e in trace:
    if e["action"] == "alloc":
        allocated_in_trace.add(e["addr"])
    elif e["action"] == "free_completed" and e["addr"] not in allocated_in_trace:
        initial += e["size"]
for seg in data["segments"]:
    if seg["device"] != dev:
        continue
    for b in seg["blocks"]:
        if b["state"] == "active_allocated" and b["address"] not in allocated_in_trace:
            initial += b["size"]
total, best = initial, 0
for e in trace:
    if e["action"] == "alloc":
        total += e["size"]
    elif e["action"] == "free_completed":
        total -= e["size"]
    if id(e) in inside:
        best = max(best, total)
check(best == requested_peak, "largest live total in the measured calls equals train_step's "
      "requested_bytes.all.peak", (best, requested_peak))
print("     allocated_bytes.all.peak (blocks, rounded): %d; the difference, %d B, is rounding"
      % (peak, peak - best))
# With --modules, the module call and phase are the events' user_metadata.
modules_history = os.path.join(out, "train_modules_history.pickle")
run = subprocess.run(
    [memprof, "run", "--modules", "-f", "train_step", "--history", modules_history,
     "-o", os.path.join(out, "history_modules.json"), "--format", "json",
     os.path.join(root, "examples", "train.py"), "--steps", "2"],
    capture_output=True, text=True,
)
check(run.returncode == 0, "memprof --modules --history ran (exit 0)", run.stderr[-500:])
mdata = pickle.load(open(modules_history, "rb"))
labels = {e.get("user_metadata", "") for t in mdata["device_traces"] for e in t}
module_labels = sorted(l for l in labels if l.startswith("module "))
check(any(l.endswith(" forward") for l in module_labels)
      and any(l.endswith(" backward") for l in module_labels),
      "with --modules, events name the module call and phase", module_labels[:4])
os.remove(modules_history)
print("history-check: %s" % ("PASSED" if not failures else "FAILED: " + ", ".join(failures)))
sys.exit(1 if failures else 0)
