"""`memprof run --simulate-gpu` against the GPU it stands in for (docs/fit.md, "Without a GPU"):
the predictions are made here, on a machine without a GPU, and checked there, in one device call.

    python3 scripts/simulate_check.py predict [KEY...]   # here: simulate each workload
    python3 scripts/simulate_check.py truth OUT [KEY...]  # there: each bare, uncapped and capped
    python3 scripts/simulate_check.py compare DIR...      # here: the table

`predict` writes .device/simulate/: each workload's simulated trace, memprof fit's prediction
on the whole device, the capacities to try (from 6% under the predicted reserved peak to 6%
over it, and under the allocated one) and the prediction at each. `truth` runs each workload
bare on the GPU (scripts/simulate_truth.py: the allocator's own peaks, its trace from torch's
history) and capped at each capacity (scripts/fit_workload.py --cap: fits or runs out of
memory). `compare` prints predicted against real. Workloads: scripts/fit_workload.py's.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STATE = os.path.join(ROOT, ".device", "simulate")
# (workload, batch): GPT-2 124M (bf16 autocast, fused AdamW, 12 x 1024), the same compiled,
# torchvision resnet50 (SGD momentum) at 32 and 64 and compiled at 64, a Llama-style model with
# LoRA.
WORKLOADS = [("gpt2", 12), ("gpt2_compiled", 12), ("resnet50", 32), ("resnet50", 64),
             ("resnet50_compiled", 64),
             ("llama_lora", 8), ("gpt2_fsdp", 12), ("gpt2_ddp", 12), ("llama_trainer", 8),
             ("llama_trainer_ddp", 8)]
# Workloads run as one rank of several (`--simulate-ranks` here, torchrun there: rank 0's peaks).
RANKS = {"gpt2_fsdp": 4, "gpt2_ddp": 4, "llama_trainer_ddp": 4}
GPU = "H100"
# The capacities tried, as fractions of the predicted reserved peak, and one under the
# predicted allocated peak (which must run out of memory).
FRACTIONS = [0.94, 0.97, 0.99, 1.0, 1.03, 1.06]


def name(workload, batch):
    return f"{workload}-b{batch}"


def memprof():
    return os.environ.get("MEMPROF", os.path.join(ROOT, "target", "release", "memprof"))


def fit(trace, memory=None):
    cmd = [memprof(), "fit", trace, "--format", "json"]
    if memory is not None:
        cmd += ["--memory", str(memory)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 5):
        sys.exit(f"memprof fit failed: {r.stderr}")
    return json.loads(r.stdout)


def predict(only=None):
    os.makedirs(STATE, exist_ok=True)
    out = {}
    saved = os.path.join(STATE, "predictions.json")
    if only and os.path.exists(saved):
        with open(saved) as f:
            out = json.load(f)  # the others' predictions, kept
    for workload, batch in WORKLOADS:
        key = name(workload, batch)
        if only and key not in only:
            continue
        trace = os.path.join(STATE, key + ".json")
        ranks = ["--simulate-ranks", str(RANKS[workload])] if workload in RANKS else []
        cmd = [memprof(), "run", "--simulate-gpu", GPU, *ranks, "--trace", trace, "-o",
               os.path.join(STATE, key + ".prediction.json"),
               os.path.join(HERE, "fit_workload.py"), workload, "--batch", str(batch)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{key}: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
        whole = fit(trace)
        allocated = whole["predicted"]["allocated_bytes.all.peak"]
        reserved = whole["predicted"]["reserved_bytes.all.peak"]
        caps = sorted({int(allocated * 0.97)} | {int(reserved * f) for f in FRACTIONS})
        out[key] = {
            "workload": workload, "batch": batch,
            "allocated_bytes.all.peak": allocated, "reserved_bytes.all.peak": reserved,
            "segment.all.peak": whole["predicted"]["segment.all.peak"],
            "notes": whole.get("simulated", {}).get("notes", []),
            "caps": [{"cap": c, "fits": fit(trace, c)["fits"]} for c in caps],
        }
        print(f"{key}: allocated {allocated}, reserved {reserved}", flush=True)
    with open(os.path.join(STATE, "predictions.json"), "w") as f:
        json.dump(out, f, indent=1)


def workload_command(workload):
    """How a workload runs bare on the GPU machine: under torchrun, one GPU a rank, when it is a
    rank's program; else on one GPU (the HuggingFace Trainer spreads itself over every visible
    GPU with DataParallel)."""
    if workload in RANKS:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc-per-node={RANKS[workload]}"]
    return ["env", "CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0],
            sys.executable]


def truth(out_dir, only=None):
    with open(os.path.join(STATE, "predictions.json")) as f:
        predictions = json.load(f)
    uncapped_only = os.environ.get("UNCAPPED_ONLY") == "1"  # the bare runs, no capacities
    results = {}
    for key, p in predictions.items():
        if only and key not in only:
            continue
        workload, batch = p["workload"], str(p["batch"])
        r = subprocess.run([*workload_command(workload), os.path.join(HERE, "simulate_truth.py"),
                            workload, "--batch", batch, "-o",
                            os.path.join(out_dir, key + ".real.json")],
                           capture_output=True, text=True)
        line = [x[6:] for x in r.stdout.splitlines() if x.startswith("TRUTH ")]
        if not line:
            print(f"{key}: no truth\n{r.stderr[-3000:]}", flush=True)
            continue
        results[key] = {"uncapped": json.loads(line[0]), "caps": []}
        for c in [] if uncapped_only else p["caps"]:
            r = subprocess.run([*workload_command(workload), os.path.join(HERE, "fit_workload.py"),
                                workload, "--batch", batch, "--cap", str(c["cap"])],
                               capture_output=True, text=True)
            line = [x for x in r.stdout.splitlines() if x.startswith("FIT ")]
            results[key]["caps"].append(json.loads(line[0][4:]) if line else
                                        {"cap": c["cap"], "error": r.stderr[-500:]})
            with open(os.path.join(out_dir, "truth.json"), "w") as f:
                json.dump({**results}, f, indent=1)
        print(f"{key}: {json.dumps(results[key]['uncapped'])}", flush=True)
        with open(os.path.join(out_dir, "truth.json"), "w") as f:
            json.dump(results, f, indent=1)  # after each workload: a call cut short keeps them


def merged_truth(truth_dirs):
    out = {}
    for d in truth_dirs:
        with open(os.path.join(d, "truth.json")) as f:
            out.update(json.load(f))
    return out


def predicted_at_real_caps(key, real_caps):
    """(prediction, real run) at each capacity the real runs were capped at: the simulated
    trace replayed there now (a prediction made again since keeps its truth)."""
    trace = os.path.join(STATE, key + ".json")
    return [({"cap": r["cap"], "fits": fit(trace, r["cap"])["fits"]}, r) for r in real_caps
            if r.get("cap") is not None]


def compare(truth_dirs):
    with open(os.path.join(STATE, "predictions.json")) as f:
        predictions = json.load(f)
    truth_ = merged_truth(truth_dirs)
    gb = 1e9
    print("| workload | allocated peak: predicted, real | reserved peak: predicted, real "
          "| capacities: fits/OOM right |")
    print("| --- | --- | --- | --- |")
    for key, p in predictions.items():
        t = truth_.get(key)
        if t is None:
            print(f"| {key} | no truth | | |")
            continue
        real = t["uncapped"]
        cells = []
        for stat in ("allocated_bytes.all.peak", "reserved_bytes.all.peak"):
            a, b = p[stat], real[stat]
            cells.append(f"{a / gb:.3f} GB, {b / gb:.3f} GB ({(a - b) / b * 100:+.2f}%)")
        right = 0
        wrong = []
        for c, r in predicted_at_real_caps(key, t["caps"]):
            if "fits" not in r:
                wrong.append(f"{c['cap'] / gb:.3f} GB: no result")
            elif c["fits"] == r["fits"]:
                right += 1
            else:
                wrong.append(f"{c['cap'] / gb:.3f} GB predicted {'fits' if c['fits'] else 'OOM'}, "
                             f"real {'fits' if r['fits'] else 'OOM'}")
        caps = f"{right} of {len(p['caps'])}" + (f" ({'; '.join(wrong)})" if wrong else "")
        print(f"| {key} | {cells[0]} | {cells[1]} | {caps} |")
    print()
    for key, p in predictions.items():
        for c, r in predicted_at_real_caps(key, truth_.get(key, {}).get("caps", [])):
            print(f"{key:18s} cap {c['cap'] / gb:8.3f} GB  predicted "
                  f"{'fits' if c['fits'] else 'OOM ':4s}  real "
                  f"{'fits' if r.get('fits') else 'OOM '}  real reserved "
                  f"{r.get('reserved_bytes.all.peak', 0) / gb:.3f} GB")


if __name__ == "__main__":
    {"predict": lambda: predict(sys.argv[2:]), "truth": lambda: truth(sys.argv[2], sys.argv[3:]),
     "compare": lambda: compare(sys.argv[2:])}[sys.argv[1]]()
