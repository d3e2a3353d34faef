"""The GPU check of --history, run by scripts/gpu-check.sh on the GPU machine: memprof profiles
examples/train.py's train_step on cuda:0 with --history; the file must load with pickle and in
torch.cuda._memory_viz (trace_plot, segment_plot, trace, segsum), its events inside the measured
calls must carry memprof's line (first frame and user_metadata), and its largest live total while
those calls run, replayed from the events as memory_viz replays them, must equal train_step's
requested_bytes.all.peak: torch's trace entries carry requested sizes, the bytes memory_viz
draws; allocated_bytes counts the allocator's blocks, rounded up to 512 B (and kept whole when
the rest is too small to split), so the allocated peak is shown beside it. The events are
memprof's own record (the allocator's trace entries): inside the measured calls each carries the
allocating thread's whole Python stack (checked frame by frame on a small nested program), and a
program that records torch's own history itself sees the same history under memprof as under
python. The events' times are µs since the epoch, within the run, in order.

    python3 scripts/history_check.py MEMPROF_BINARY OUT_DIR
"""
import json
import os
import pickle
import subprocess
import sys
import time

from torch.cuda import _memory_viz as mv

memprof, out = sys.argv[1], sys.argv[2]
root = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
history = os.path.join(out, "train_history.pickle")
report_path = os.path.join(out, "history_train.json")
started_us = time.time_ns() // 1000
run = subprocess.run(
    [memprof, "run", "-f", "train_step", "--history", history, "--format", "json",
     "--stat", "requested_bytes.all.peak,allocated_bytes.all.peak",
     "-o", report_path, os.path.join(root, "examples", "train.py"), "--steps", "3"],
    capture_output=True, text=True,
)
ended_us = time.time_ns() // 1000
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

check(mv.trace_plot(data).lstrip().startswith("<!DOCTYPE html>"),
      "trace_plot builds the viewer's page")
check("<script" in mv.segment_plot(data), "segment_plot builds the viewer's page")
check(len(mv.trace(data)) > 0 and "Summary of segments" in mv.segsum(data),
      "trace and segsum walk it")

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
times = [e["time_us"] for e in trace]
check(bool(times) and started_us <= min(times) and max(times) <= ended_us
      and times == sorted(times),
      "the events' times are µs since the epoch within the run, in order",
      (min(times), max(times), started_us, ended_us) if times else None)
check(report["history"]["events"] == sum(len(t) for t in data["device_traces"])
      and report["history"]["dropped"] == 0, "the report counts the file's events",
      report["history"])
forward = [e for e in ours if e["action"] == "alloc"
           and {"forward", "train_step"} <= {f["name"] for f in e["frames"][1:]}]
check(len(forward) > 0, "the forward's allocations carry the whole Python stack (forward, "
      "train_step, ...)", [f["name"] for f in (forward or ours)[0]["frames"]] if ours else None)

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

# Whole stacks on CUDA, frame by frame: a helper reached through a method from a loop (the
# fixture tests/history.rs checks on the CPU).
nested_history = os.path.join(out, "nested_cuda.pickle")
run = subprocess.run([memprof, "run", "--history", nested_history, "-f", "step",
                      os.path.join(root, "fixtures", "history_nested.py"), "cuda"],
                     capture_output=True, text=True)
check(run.returncode == 0, "memprof --history on the nested program ran (exit 0)",
      run.stderr[-500:])
ndata = pickle.load(open(nested_history, "rb"))
allocs = [[e["size"], [[os.path.basename(f["filename"]), f["line"], f["name"]]
                       for f in e["frames"]]]
          for t in ndata["device_traces"] for e in t if e["action"] == "alloc"]
frames = [["memprof", 22, "step line 22"], ["history_nested.py", 13, "make"],
          ["history_nested.py", 18, "forward"], ["history_nested.py", 22, "step"],
          ["history_nested.py", 28, "<module>"]]
check(allocs == [[4096, frames], [8192, frames]],
      "each CUDA allocation's whole Python stack, frame by frame", allocs)

# A program that records torch's own history: the same history under memprof as under python.
OWN = """import json
import torch


def step(x):
    y = x * 2
    return (y + 1).sum()


torch.cuda.memory._record_memory_history(max_entries=10000, stacks="python")
x = torch.ones(256, 256, device="cuda")
for _ in range(3):
    step(x)
snapshot = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(None)
trace = snapshot["device_traces"][torch.cuda.current_device()]
print("OWN " + json.dumps([[e["action"], e["size"], [[f["name"], f["line"]] for f in e["frames"]
                                                    if f["filename"] == __file__]]
                           for e in trace]))
"""
own = os.path.join(out, "own_history.py")
with open(own, "w") as f:
    f.write(OWN)


def own_trace(command):
    r = subprocess.run(command + [own], capture_output=True, text=True)
    line = [l for l in r.stdout.splitlines() if l.startswith("OWN ")]
    return r.returncode, (json.loads(line[0][4:]) if line else r.stderr[-500:])


plain = own_trace([sys.executable])
profiled = own_trace([memprof, "run", "--history", os.path.join(out, "own_memprof.pickle"),
                      "-f", "step"])
check(plain[0] == 0 and profiled[0] == 0 and plain[1] == profiled[1]
      and any(frames for _a, _s, frames in plain[1]),
      "a program's own torch history is the same under memprof --history as under python",
      (len(plain[1]), len(profiled[1])) if plain[0] == profiled[0] == 0 else (plain, profiled))
# --trace and --history at once: the allocator's one tracker serves both (requested sizes for
# the trace, every entry for the history).
both_trace = os.path.join(out, "both_trace.json")
both_history = os.path.join(out, "both_history.pickle")
run = subprocess.run([memprof, "run", "--trace", both_trace, "--history", both_history,
                      "-f", "train_step", os.path.join(root, "examples", "train.py"),
                      "--steps", "2"], capture_output=True, text=True)
trace_file = json.load(open(both_trace)) if run.returncode == 0 else {}
both = pickle.load(open(both_history, "rb")) if run.returncode == 0 else {"device_traces": []}
check(run.returncode == 0 and trace_file.get("sizes") == "requested"
      and any(e.get("segment_alloc") for e in trace_file.get("events", []))
      and sum(len(t) for t in both["device_traces"]) > 0,
      "--trace and --history together: the trace's requested sizes and the history's events",
      (run.returncode, trace_file.get("sizes"), run.stderr[-300:]))
print("history-check: %s" % ("PASSED" if not failures else "FAILED: " + ", ".join(failures)))
sys.exit(1 if failures else 0)
