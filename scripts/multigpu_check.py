"""Checks memprof's per-rank reports of fixtures/multigpu/{ddp,fsdp}.py against what each rank's
program said itself (truth.rank{r}.json): the device each rank used, its peak, and (FSDP2) the
parameter shards and collective bytes. Prints one line per check; exits 1 if any fails.

    python3 scripts/multigpu_check.py ddp|fsdp DIR REPORT_PATTERN   # e.g. DIR/f.rank{rank}.json
"""
import json
import sys

kind, directory, pattern = sys.argv[1], sys.argv[2], sys.argv[3]
failed = 0


def check(what, got, want):
    global failed
    ok = got == want
    failed += not ok
    print(f"  {'ok  ' if ok else 'FAIL'} {what}: memprof {got}, program {want}")


def load(path):
    with open(path) as f:
        return json.load(f)


def function(report, name):
    return next(f for f in report["functions"] if f["qualname"] == name)


def line(func, needle):
    return next(l for l in func["lines"] if needle in l["source"])


def forward_row(report, module):
    return next(e for e in report["modules"]["modules"]
                if e["module"] == module and e["phase"] == "forward")


for rank in range(2):
    truth = load(f"{directory}/truth.rank{rank}.json")
    report = load(pattern.format(rank=rank))
    md = report["metadata"]
    print(f"rank {rank} ({md['device']['type']}:{md['device']['index']}, {md['device']['name']}):")
    check("rank in the report", md["process"]["rank"], rank)
    step = function(report, "train_step")
    check("train_step's peak allocated_bytes.all.peak = max_memory_allocated()",
          step["peak_allocated_bytes"], truth["max_memory_allocated"])
    if kind == "ddp":
        check("device measured = the program's current device", md["device"]["index"], truth["device"])
        check("loss.backward() all_reduce bytes = 3 steps x parameter bytes",
              line(step, "loss.backward()").get("collectives"), {"all_reduce": 3 * truth["parameter_bytes"]})
        continue
    total = truth["total_unsharded_bytes"]
    layers = 0
    for name, full in truth["layer_unsharded_bytes"].items():
        layers += full
        row = forward_row(report, name)
        check(f"{name} forward all_gather = 2 calls x its unsharded bytes",
              row["collectives"].get("all_gather"), 2 * full)
        check(f"{name} parameter bytes (local shard, unsharded)",
              (row["parameter_bytes"], row.get("unsharded_parameter_bytes")),
              (truth["layer_local_bytes"][name], full))
    root = forward_row(report, "")
    check("model parameter bytes (local shards, unsharded)",
          (root["parameter_bytes"], root.get("unsharded_parameter_bytes")),
          (truth["local_parameter_bytes"], total))
    check("logits = model(tokens): all_gather = 2 x all unsharded bytes",
          line(step, "logits = model(tokens)").get("collectives"), {"all_gather": 2 * total})
    check("loss.backward(): layers gathered again, every gradient reduce-scattered",
          line(step, "loss.backward()").get("collectives"),
          {"all_gather": 2 * layers, "reduce_scatter": 2 * total})

print(f"multigpu_check {kind}: {'PASSED' if not failed else f'{failed} FAILED'}")
sys.exit(1 if failed else 0)
