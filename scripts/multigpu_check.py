"""Checks memprof's per-rank reports of fixtures/multigpu/{ddp,fsdp}.py against what each rank's
program said itself (truth.rank{r}.json): the device each rank used, its peak, and (FSDP2) the
parameter shards and collective bytes. Prints one line per check; exits 1 if any fails.

    python3 scripts/multigpu_check.py ddp|fsdp DIR REPORT_PATTERN   # e.g. DIR/f.rank{rank}.json
    python3 scripts/multigpu_check.py ddp-peak|fsdp-peak DIR REPORT_PATTERN
    python3 scripts/multigpu_check.py fsdp-compiled DIR REPORT_PATTERN BARE_DIR

The -peak kinds check reports of runs with no flags (issue 24): each rank's peak is its own
device's max_memory_allocated(), its sites sum to it with nothing unseen, DDP's input batch is at
its line with each rank's own size (rank 1's is 4x), and FSDP2's peak has sites at the lines that
run forward and backward.

fsdp-compiled checks a run of `fsdp.py --compile` (each block torch.compile'd, then sharded) as
fsdp, and more: the program's own readings (losses, max_memory_allocated, memory_allocated,
memory_reserved) identical to those of a bare run on the same warm inductor cache (BARE_DIR's
truth files), and the compiled blocks' submodules in the compiled modules rows.
"""
import glob
import json
import sys

kind, directory, pattern = sys.argv[1], sys.argv[2], sys.argv[3]
bare_directory = sys.argv[4] if kind == "fsdp-compiled" else None
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


def check_peak(rank, report, truth):
    peak = report["peak"]
    parts = (sum(s["bytes"] for s in peak["sites"]) + (peak.get("other_sites") or {}).get("bytes", 0)
             + peak["unseen_bytes"])
    if truth["max_memory_allocated"] is not None:
        check("the peak = max_memory_allocated()", peak["allocated_bytes"], truth["max_memory_allocated"])
    check("Σ sites = the peak", parts, peak["allocated_bytes"])
    check("unseen bytes", peak["unseen_bytes"], 0)
    sources = [s["source"] for s in peak["sites"]]
    if kind == "ddp-peak":
        batch = (16 if truth["max_memory_allocated"] is None else 2048) * (4 if rank == 1 else 1)
        x = next((s for s in peak["sites"] if s["source"] == "x = torch.randn(batch, 1024, device=device)"), None)
        check("the input batch's site: this rank's batch x 1024 float32", x and x["bytes"], batch * 1024 * 4)
    else:
        check("a site at the line that runs backward", "loss.backward()" in sources, True)
        check("a site in the forward", any(s["function"] in ("Block.forward", "Transformer.forward")
                                          or s["source"] == "logits = model(tokens)" for s in peak["sites"]), True)
    print("  sites:", "; ".join(f"{s['file'].rsplit('/', 1)[-1]}:{s['line']} {s['bytes']}" for s in peak["sites"][:6]))


# Every rank that wrote its truth: 2 on two GPUs, 4 on four (scripts/gpu-ranks-check.sh).
world = len(glob.glob(f"{directory}/truth.rank*.json"))
for rank in range(world):
    truth = load(f"{directory}/truth.rank{rank}.json")
    report = load(pattern.format(rank=rank))
    md = report["metadata"]
    print(f"rank {rank} ({md['device']['type']}:{md['device']['index']}, {md['device']['name']}):")
    check("rank in the report", md["process"]["rank"], rank)
    if kind.endswith("-peak"):
        if truth.get("device") is not None:
            check("the measured device is the rank's own", md["device"]["index"], truth["device"])
        check_peak(rank, report, truth)
        continue
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
    if kind == "fsdp-compiled":
        bare = load(f"{bare_directory}/truth.rank{rank}.json")
        for key in ("losses", "max_memory_allocated", "memory_allocated", "memory_reserved"):
            check(f"the program's {key}, bare on the same warm cache", truth.get(key), bare.get(key))
        rows = {(e["root"], e["module"], e["phase"]): e for e in report["modules"].get("compiled_modules", [])}
        check("compiled rows of the blocks' submodules (Block: attn, mlp.0), forward runs",
              [rows.get(("Block", m, "forward"), {}).get("calls") for m in ("", "attn", "mlp.0")], [8, 8, 8])

check("ranks checked", world >= 2, True)
print(f"multigpu_check {kind} ({world} ranks): {'PASSED' if not failed else f'{failed} FAILED'}")
sys.exit(1 if failed else 0)
