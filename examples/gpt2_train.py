"""A GPT-2 training loop at module level, as nanoGPT's train.py has it: bf16 autocast, fused
AdamW, gradient clipping. GPT-2 124M with batch 12 x 1024 by default (on the GPU when there is
one); smaller with --layers/--embd/--batch/--seq.

    memprof run examples/gpt2_train.py
    memprof run examples/gpt2_train.py --device cpu --layers 2 --embd 64 --heads 2 --batch 2 --seq 64 --vocab 512

--history PATH records torch's own allocation history and dumps it there (scripts/peak_check.py
replays it); --bench prints the step times.
"""
import argparse
import json
import time

import torch

from gpt2_model import GPT, GPTConfig

p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
p.add_argument("--layers", type=int, default=12)
p.add_argument("--embd", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--vocab", type=int, default=50304)
p.add_argument("--batch", type=int, default=12)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--steps", type=int, default=5)
p.add_argument("--history", default=None)
p.add_argument("--bench", action="store_true")
args = p.parse_args()
device = args.device
cuda = device.startswith("cuda")
if args.history:
    torch.cuda.memory._record_memory_history(max_entries=4_000_000, stacks="python")

torch.manual_seed(1337)
config = GPTConfig(block_size=args.seq, vocab_size=args.vocab, n_layer=args.layers, n_head=args.heads, n_embd=args.embd)
model = GPT(config)
model.to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=cuda)
autocast = torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16)

times = []
for step in range(args.steps):
    t0 = time.perf_counter()
    x = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    y = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    with autocast:
        logits, loss = model(x, y)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
    print(f"step {step}: loss {loss.item():.4f}")

if cuda:
    print("max_memory_allocated", torch.cuda.max_memory_allocated())
if args.bench:
    # The steps after the first two (allocator warm-up, autotuning), as benches/ reads them.
    print("BENCH " + json.dumps({"case": "gpt2", "times": times[2:]}))
if args.history:
    torch.cuda.memory._dump_snapshot(args.history)
    torch.cuda.memory._record_memory_history(enabled=None)
