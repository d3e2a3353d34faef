"""Agreement on real models: a training step of torchvision's resnet50 or of a small GPT-2
(transformers, random weights), `train_step` targeted. The script reads torch's own numbers
around each call and prints them; run under memprof, under pytorch_memlab (`--memlab`, which also
prints memlab's per-line peaks) or alone.

    python3 benches/agree.py resnet|gpt2 [--memlab]
"""
import argparse
import json
import os

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def build(kind):
    torch.manual_seed(0)
    if kind == "resnet":
        import torchvision
        model = torchvision.models.resnet50(weights=None).cuda()
        batch = (torch.randn(32, 3, 224, 224, device="cuda"), torch.randint(0, 1000, (32,), device="cuda"))

        def loss_of(model, batch):
            return torch.nn.functional.cross_entropy(model(batch[0]), batch[1])
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=8192, n_positions=256)
        model = GPT2LMHeadModel(config).cuda()
        ids = torch.randint(0, 8192, (16, 256), device="cuda")
        batch = (ids, ids)

        def loss_of(model, batch):
            return model(batch[0], labels=batch[1]).loss
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, optimizer, batch, loss_of


def train_step(model, optimizer, batch, loss_of):
    optimizer.zero_grad(set_to_none=True)
    loss = loss_of(model, batch)
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["resnet", "gpt2"])
    p.add_argument("--memlab", action="store_true")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    model, optimizer, batch, loss_of = build(args.kind)
    prof = None
    if args.memlab:
        from pytorch_memlab import LineProfiler
        prof = LineProfiler(train_step)
        prof.enable()
    readings = []
    for _ in range(args.steps):
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        train_step(model, optimizer, batch, loss_of)
        readings.append({
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
            "memory_allocated_delta": torch.cuda.memory_allocated() - before,
        })
    print("READINGS " + json.dumps(readings), flush=True)
    if prof is not None:
        prof.disable()
        peaks = {}
        for rec in prof._raw_line_records:
            line = rec["line"]
            peaks[line] = max(peaks.get(line, 0), rec["allocated_bytes.all.peak"])
        print("MEMLAB " + json.dumps(peaks), flush=True)


if __name__ == "__main__":
    main()
