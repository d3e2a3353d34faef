"""A torch.compile'd training step, as people run them: a GPT-2-size transformer (bf16 autocast,
fused AdamW), a torchvision resnet50, or an MLP under mode="reduce-overhead" (CUDA graphs). At
the end it prints its own readings as one JSON line (max_memory_allocated, memory_allocated,
memory_reserved, the first step's loss), which scripts/compiled_check.py compares with and without
memprof.

    memprof run examples/compiled_step.py --model gpt2
    memprof run -f Block.forward examples/compiled_step.py --model gpt2

--mode picks torch.compile's mode, --compiled-autograd compiles the backward too, --bench prints
the step times after the first 3 (benches/compiled_cost.sh).
"""
import argparse
import json
import time

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--model", choices=["gpt2", "resnet50", "mlp"], default="gpt2")
p.add_argument("--mode", default=None, help="torch.compile mode (mlp: reduce-overhead)")
p.add_argument("--steps", type=int, default=3)
p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
p.add_argument("--compiled-autograd", action="store_true", help="compile the backward too")
p.add_argument("--bench", action="store_true", help="print the step times after the first 3")
p.add_argument("--history", default=None,
               help="record torch's allocation history and dump it here, with the source frames "
                    "of each generated line in it (PATH.frames.json; scripts/peak_check.py)")
args = p.parse_args()
if args.history:
    torch.cuda.memory._record_memory_history(max_entries=4_000_000, stacks="python")
if args.compiled_autograd:
    torch._dynamo.config.compiled_autograd = True
device = args.device
cuda = device.startswith("cuda")
torch.manual_seed(0)

if args.model == "gpt2":
    from gpt2_model import GPT, GPTConfig

    config = GPTConfig(block_size=1024, vocab_size=50304) if cuda else GPTConfig(
        block_size=64, vocab_size=512, n_layer=2, n_head=2, n_embd=64)
    model = GPT(config).to(device)
    batch = 8 if cuda else 2
    x = torch.randint(0, config.vocab_size, (batch, config.block_size), device=device)
    y = torch.randint(0, config.vocab_size, (batch, config.block_size), device=device)
    inputs = (x, y)
elif args.model == "resnet50":
    import torchvision

    model = torchvision.models.resnet50().to(device)
    batch = 64 if cuda else 2
    x = torch.randn(batch, 3, 224, 224, device=device)
    target = torch.randint(0, 1000, (batch,), device=device)
    inputs = (x,)
else:
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(device)
    x = torch.randn(256, 1024, device=device)
    inputs = (x,)

mode = args.mode or ("reduce-overhead" if args.model == "mlp" else None)
compiled = torch.compile(model, mode=mode)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)


def train_step(inputs):
    with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=cuda):
        if args.model == "gpt2":
            _, loss = compiled(*inputs)
        elif args.model == "resnet50":
            loss = nn.functional.cross_entropy(compiled(*inputs), target)
        else:
            loss = compiled(*inputs).float().pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


losses, times = [], []
for step in range(args.steps):
    start = time.perf_counter()
    losses.append(train_step(inputs))
    if cuda:
        torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
if args.bench:
    print("BENCH", json.dumps({"times": times[3:]}))
# The first step's loss (its forward is deterministic; later ones follow backward passes whose
# kernels may add in any order).
readings = {"first_loss": round(losses[0].item(), 6)}
if cuda:
    torch.cuda.synchronize()
    readings.update(
        max_memory_allocated=torch.cuda.max_memory_allocated(),
        memory_allocated=torch.cuda.memory_allocated(),
        memory_reserved=torch.cuda.memory_reserved(),
    )
print("readings", json.dumps(readings, sort_keys=True))
if args.history:
    # torch's own map of inductor's generated lines to their FX nodes' frames, for the lines in
    # the history (it lives in this process only).
    from torch._inductor.codecache import PyCodeCache

    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    frames = {}
    for trace in snapshot["device_traces"]:
        for event in trace:
            for f in event.get("frames") or ():
                key = f"{f['filename']}:{f['line']}"
                if key not in frames and f["filename"] in PyCodeCache.linemaps:
                    mapped = PyCodeCache.stack_frames_for_code(f["filename"], f["line"]) or []
                    frames[key] = [[m["filename"], m["line"], m["name"]] for m in mapped]
    import pickle

    with open(args.history, "wb") as out:
        pickle.dump(snapshot, out)
    with open(args.history + ".frames.json", "w") as out:
        json.dump(frames, out)
