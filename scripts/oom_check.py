"""The GPU check of OOM forensics (issue 10), run by scripts/gpu-check.sh on the GPU machine:
memprof runs fixtures/oom_cuda.py without -f; the report's `oom` record must name the right
lines, give the requested bytes torch's message gives, allocated/reserved equal to what
torch.cuda.memory_stats() read in the script's own `except`, the largest live tensors by name,
and count the caught OOM.

    python3 scripts/oom_check.py MEMPROF_BINARY OUT_DIR
"""
import json
import os
import subprocess
import sys

memprof, out = sys.argv[1], sys.argv[2]
report_path = os.path.join(out, "oom.json")
fixture = os.path.join(os.path.dirname(__file__), "..", "fixtures", "oom_cuda.py")
fixture = os.path.realpath(fixture)
run = subprocess.run(
    [memprof, "run", "--format", "json", "-o", report_path, fixture],
    capture_output=True, text=True,
)
print(run.stdout)
print(run.stderr[-3000:])
expect = json.loads(next(l for l in run.stdout.splitlines() if l.startswith("EXPECT "))[7:])
report = json.load(open(report_path))
oom = report["oom"]
lines = open(fixture).read().splitlines()


def line_of(text):
    return next(i + 1 for i, l in enumerate(lines) if text in l)


def format_size(n):  # c10's, as torch's message prints sizes
    if n <= 1024:
        return f"{n} bytes"
    if n <= 1048576:
        return f"{n / 1024:.2f} KiB"
    if n <= 1073741824:
        return f"{n / 1048576:.2f} MiB"
    return f"{n / 1073741824:.2f} GiB"


failures = []


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what} {detail}")
    if not ok:
        failures.append(what)


check("exit code is the script's (1)", run.returncode == 1, run.returncode)
check("two OOMs, one caught", (oom["count"], oom["caught"]) == (2, 1), (oom["count"], oom["caught"]))
first, last = oom["events"][0], oom["events"][-1]
check("the caught one: caught, from the allocator", first["caught"] and first["source"] == "allocator")
check("the caught one's line is the batch's", first["line"]["line"] == line_of("batch = torch.randn"),
      first["line"])
check("the caught one asked for the 16 GiB batch", first["requested_bytes"] == (1 << 20) * 4096 * 4,
      first["requested_bytes"])
check("the last one: not caught", not last["caught"] and last["source"] == "allocator")
check("its line is the model call in forward_backward",
      (last["line"]["function"], last["line"]["line"]) == ("forward_backward", line_of("out = model(batch)")),
      last["line"])
check("requested bytes as torch's message says",
      f"Tried to allocate {format_size(last['requested_bytes'])}." in expect["message"],
      (last["requested_bytes"], expect["message"][:80]))
check("allocated equals memory_stats() in the script's except",
      last["allocated_bytes"] == expect["allocated"], (last["allocated_bytes"], expect["allocated"]))
check("reserved equals memory_stats() in the script's except",
      last["reserved_bytes"] == expect["reserved"], (last["reserved_bytes"], expect["reserved"]))
check("allocator counted both (num_ooms)", expect["num_ooms"] == 2, expect["num_ooms"])
tensors = last["tensors"]["tensors"]
names = [t["name"] for t in tensors[:4]]
check("the largest live tensors are named", any("forward_backward:batch" in (n or "") for n in names), names)
check("the process's cap is known", last.get("process_cap_bytes") == 3 * 2**30,
      last.get("process_cap_bytes"))
print("suggestions:", [(s["kind"], s["saving_bytes"]) for s in oom["suggestions"]])
show = subprocess.run([memprof, "show", report_path], capture_output=True, text=True)
print(show.stdout[show.stdout.find("Out of memory"):])
print("oom-check:", "PASSED" if not failures else "FAILED " + ", ".join(failures))
sys.exit(1 if failures else 0)
