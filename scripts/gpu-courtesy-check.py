"""memprof.courtesy() on the GPU (issue 54), one device call after scripts/build-device.sh:
    run(command="python3 scripts/gpu-courtesy-check.py", carry=[".device"])
The program (fixtures/memlab_api.py courtesy cuda --hold --ballast 40) trains an MLP with Adam
and holds a 40 GiB tensor; at yield_memory() its device memory must be what nothing could move
(memory_allocated() = the report's kept + unreachable bytes), and another process must then be
able to allocate 60 GiB, more than was free while the program held its memory; after restore()
every tensor is back (identity, values, gradients, optimizer state, strides, views) and the
losses are those of the same program run without courtesy. The package is the checkout's
(src/wheel): courtesy is Python on torch, with no native part.
"""
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
env = dict(os.environ, PYTHONPATH=os.path.join(repo, "src", "wheel"))
fixture = os.path.join(repo, "fixtures", "memlab_api.py")
failed = 0


def check(what, ok, detail=""):
    global failed
    failed += not ok
    print("  %s %s %s" % ("ok  " if ok else "FAIL", what, detail))


def tagged(lines, tag):
    for line in lines:
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    raise SystemExit("no %s line in:\n%s" % (tag, "\n".join(lines)))


def free_gib():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True).stdout.split(",")
    return "%s of %s MiB used" % (out[0].strip(), out[1].strip())


print("== the program: courtesy cuda --hold --ballast 40 (GPU: %s before)" % free_gib())
program = subprocess.Popen([sys.executable, fixture, "courtesy", "cuda", "--hold", "--ballast", "40"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
lines = []
while True:
    line = program.stdout.readline()
    if not line:
        break
    lines.append(line.rstrip("\n"))
    if line.startswith("DURING "):
        break
report, during = tagged(lines, "REPORT"), tagged(lines, "DURING")
kept = sum(k["bytes"] for k in report["kept"])
print("  report: moved %.2f GiB in %d storages (%s); kept %d B %s; allocated after %d B, of which "
      "unreachable %d B; reserved after %d B" % (
          report["moved_bytes"] / 2**30, report["moved_storages"],
          ", ".join("%s %d" % kv for kv in report["moved_by_category"].items() if kv[1]),
          kept, [k["reason"][:40] for k in report["kept"]], report["allocated_after"],
          report["unreachable_bytes"], report["reserved_after"]))
check("memory_allocated() after = what the report says could not move",
      during["allocated"] == report["allocated_after"] == kept + report["unreachable_bytes"],
      "%d = %d = %d + %d" % (during["allocated"], report["allocated_after"], kept, report["unreachable_bytes"]))
check("every parameter and gradient on the CPU meanwhile", during["devices"] == ["cpu"], str(during["devices"]))
check("the view still shares its parameter's storage", during["view_shares"])
print("== another process allocates 60 GiB while the program waits (GPU: %s)" % free_gib())
other = subprocess.run([sys.executable, "-c",
                        "import torch; x = torch.empty(60 << 30, dtype=torch.uint8, device='cuda'); "
                        "x.fill_(1); torch.cuda.synchronize(); print(torch.cuda.memory_allocated())"],
                       capture_output=True, text=True)
check("the other process got 60 GiB", other.returncode == 0 and other.stdout.strip() == str(60 << 30),
      (other.stdout.strip() or other.stderr.strip().splitlines()[-1:]))
program.stdin.write("\n")
program.stdin.flush()
rest, _ = program.communicate(timeout=300)
lines += rest.splitlines()
check("the program ended", program.returncode == 0, str(program.returncode))
after = tagged(lines, "AFTER")
for key in ("same_objects", "values", "grads", "state", "meta", "view_shares", "view_equal"):
    check("after restore(): " + key, after[key] is True)
check("the 40 GiB tensor back on the GPU, its values intact", tagged(lines, "BALLAST") is True)
bare = subprocess.run([sys.executable, fixture, "none", "cuda", "--ballast", "40"], capture_output=True, text=True, env=env)
with_courtesy, without = tagged(lines, "LOSSES"), tagged(bare.stdout.splitlines(), "LOSSES")
check("the losses = those of the program without courtesy", with_courtesy == without,
      "%s vs %s" % (with_courtesy[-1], without[-1]))
print("gpu-courtesy-check: %s" % ("PASSED" if not failed else "%d FAILED" % failed))
sys.exit(1 if failed else 0)
