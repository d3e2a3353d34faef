"""What `--history` records for resnet50's training step, as one line to compare between two
builds (scripts/gpu-history-parity.sh): a few steps of benches/workloads.py's resnet50 step
under `memprof.profile(train_step, history=FILE)`, then the events' count, how many carry a
stack, and a digest of every event's action, requested size and whole stack (file, line and
function of each frame). Two builds that record the same history print the same line (addresses
and times are left out: they differ from process to process).

    python3 scripts/history_parity.py [STEPS] [--device cuda|cpu]
"""
import argparse
import hashlib
import json
import os
import pickle
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benches"))
import torch  # noqa: E402

import memprof  # noqa: E402
import workloads  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("steps", nargs="?", type=int, default=3)
p.add_argument("--device", default="cuda")
args = p.parse_args()
torch.manual_seed(0)
model, optimizer, images, labels = workloads.resnet_setup(args.device, 32)
step = workloads.train_step
for _ in range(2):
    step(model, optimizer, images, labels)
path = os.path.join(tempfile.mkdtemp(), "history.pickle")
with memprof.profile(step, history=path):
    for _ in range(args.steps):
        step(model, optimizer, images, labels)
if args.device == "cuda":
    torch.cuda.synchronize()
snapshot = pickle.load(open(path, "rb"))
events = [(e["action"], e["size"], [(f["filename"], f["line"], f["name"]) for f in e.get("frames", [])])
          for trace in snapshot["device_traces"] for e in trace]
digest = hashlib.sha1(json.dumps(events).encode()).hexdigest()
print("HISTORY events %d with_stacks %d frames %d digest %s" % (
    len(events), sum(1 for e in events if e[2]), sum(len(e[2]) for e in events), digest))
