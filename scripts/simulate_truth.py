"""The truth `memprof run --simulate-gpu` is checked against (docs/fit.md, "Without a GPU"): a
workload run on a real GPU (rank 0 of a torchrun for the ranks' workloads), bare, with torch's own allocation history on, written as a memprof
allocation trace (every allocation the CUDA caching allocator saw, its size, stream and line, and
the allocator's own peaks), so that it can be compared line by line with a simulated trace and
replayed by `memprof fit`. Workloads: scripts/fit_workload.py's gpt2 and resnet50.

    python3 scripts/simulate_truth.py gpt2 --batch 12 --steps 3 -o real-gpt2.json
"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fit_workload  # noqa: E402

USER_DIRS = (os.path.realpath(os.path.join(HERE, "..")) + os.sep,)


def site(frames):
    """The innermost frame in this repository's files (the examples', the workload's)."""
    for f in frames:
        name = f.get("filename", "")
        real = os.path.realpath(name) if name.startswith("/") else name
        if real.startswith(USER_DIRS) and "site-packages" not in real:
            return f"{os.path.basename(name)}:{f.get('line')}"
    return "<unknown>"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["gpt2", "resnet50", "gpt2_compiled", "resnet50_compiled",
                                        "llama_lora",
                                        "gpt2_fsdp", "gpt2_ddp", "llama_trainer",
                                        "llama_trainer_ddp"])
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args()
    if os.environ.get("RANK", "0") != "0":
        # Under torchrun: the other ranks run bare; rank 0 (cuda:0) is the one measured.
        getattr(fit_workload, args.workload)(args.batch, args.steps)
        return
    torch.cuda.memory._record_memory_history(max_entries=10_000_000, stacks="python")
    getattr(fit_workload, args.workload)(args.batch, args.steps)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats()
    events, ids, count = [], {}, 0
    for e in snapshot["device_traces"][0]:
        action = e["action"]
        if action == "alloc":
            count += 1
            ident = count
            ids[e["addr"]] = ident
            events.append({"alloc": ident, "size": e["size"], "stream": 0,
                           "at": site(e.get("frames", []))})
        elif action == "free_completed" and e["addr"] in ids:
            events.append({"free": ids.pop(e["addr"])})
    free, total = torch.cuda.mem_get_info()
    trace = {
        "memprof_trace": 1,
        "torch_version": torch.__version__,
        "device": {"name": torch.cuda.get_device_name(0),
                   "total_memory": total - (total - free - stats["reserved_bytes.all.current"]),
                   "device_memory": total},
        "measured": {"reserved_bytes.all.peak": stats["reserved_bytes.all.peak"],
                     "allocated_bytes.all.peak": stats["allocated_bytes.all.peak"],
                     "num_alloc_retries": stats["num_alloc_retries"],
                     "segment.all.peak": stats["segment.all.peak"],
                     "outside_allocator_bytes": total - free - stats["reserved_bytes.all.current"]},
        "sizes": "block",
        "events": events,
    }
    with open(args.output, "w") as f:
        json.dump(trace, f)
    print("TRUTH " + json.dumps({"workload": args.workload, "batch": args.batch,
                                 "device": torch.cuda.get_device_name(0),
                                 "total_memory": total, **trace["measured"]}))


if __name__ == "__main__":
    main()
