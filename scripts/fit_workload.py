"""One workload of scripts/fit_check.py (issue 23's GPU acceptance), run bare or under
`memprof run --trace`: a torchvision resnet50 training step (SGD with momentum, fp32), a GPT-2
124M step (examples/gpt2_train.py's: bf16 autocast, fused AdamW, clipping) or a program that
fragments the caching allocator (a growing temporary beside a small tensor kept from each
step), for a few steps, with the allocator optionally capped at --cap bytes
(torch.cuda.set_per_process_memory_fraction). Prints what the allocator itself read as one
`FIT {json}` line, whether the program ran out of memory or not.

    python scripts/fit_workload.py gpt2 --batch 8 --cap 20000000000
"""
import argparse
import json
import os
import sys

import torch

MiB = 1024 * 1024


def resnet50(batch, steps, compiled=False):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda()
    if compiled:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        images = torch.randn(batch, 3, 224, 224, device="cuda")
        labels = torch.randint(0, 1000, (batch,), device="cuda")
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()


def gpt2(batch, steps, compiled=False):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from gpt2_model import GPT, GPTConfig

    torch.manual_seed(1337)
    model = GPT(GPTConfig(block_size=1024, vocab_size=50304, n_layer=12, n_head=12, n_embd=768)).cuda()
    if compiled:
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    for _ in range(steps):
        x = torch.randint(0, 50304, (batch, 1024), device="cuda")
        y = torch.randint(0, 50304, (batch, 1024), device="cuda")
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def resnet50_compiled(batch, steps):
    """resnet50's step with the model under torch.compile (inductor)."""
    resnet50(batch, steps, compiled=True)


def gpt2_compiled(batch, steps):
    """gpt2's step with the model under torch.compile (inductor)."""
    gpt2(batch, steps, compiled=True)


def llama_lora(batch, steps):
    """A Llama-style model from its config (HuggingFace transformers, about 150M parameters,
    bf16 weights, SDPA attention), LoRA adapters on the attention projections (peft), AdamW on
    the adapters, sequences of 512 tokens."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                         num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=8,
                         max_position_embeddings=1024)
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).to("cuda", dtype=torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(steps):
        ids = torch.randint(0, 32000, (batch, 512), device="cuda")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def _rank_device():
    """Under torchrun (or `memprof run --simulate-ranks`): this rank's GPU and process group."""
    import torch.distributed as dist

    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    return torch.device("cuda", int(os.environ["LOCAL_RANK"]))


def _gpt2_model():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from gpt2_model import GPT, GPTConfig

    torch.manual_seed(1337)
    return GPT(GPTConfig(block_size=1024, vocab_size=50304, n_layer=12, n_head=12, n_embd=768))


def gpt2_fsdp(batch, steps):
    """GPT-2 124M under FSDP2, each rank's step: every block and the root sharded
    (fully_shard), bf16 parameters with fp32 gradient reduction (MixedPrecisionPolicy), AdamW,
    12 x 1024 tokens a rank. Run under torchrun, one GPU a rank."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    device = _rank_device()
    model = _gpt2_model()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    _gpt2_steps(model, optimizer, device, batch, steps, autocast=False)


def gpt2_ddp(batch, steps):
    """GPT-2 124M under DistributedDataParallel, each rank's step: bf16 autocast, fused AdamW,
    12 x 1024 tokens a rank. Run under torchrun, one GPU a rank."""
    from torch.nn.parallel import DistributedDataParallel

    device = _rank_device()
    model = DistributedDataParallel(_gpt2_model().to(device), device_ids=[device.index])
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    _gpt2_steps(model, optimizer, device, batch, steps, autocast=True)


def _gpt2_steps(model, optimizer, device, batch, steps, autocast):
    """A rank's GPT-2 training steps on random tokens (12 x 1024 at batch 12), in bf16 autocast
    or not."""
    for _ in range(steps):
        x = torch.randint(0, 50304, (batch, 1024), device=device)
        y = torch.randint(0, 50304, (batch, 1024), device=device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=autocast):
            _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def llama_trainer(batch, steps):
    """A HuggingFace Trainer fine-tune (transformers and accelerate): a Llama-style model from
    its config (87M parameters), bf16 mixed precision, gradient checkpointing, AdamW,
    sequences of 512 tokens. Under torchrun the Trainer wraps it in DDP itself."""
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return batch * steps * 8

        def __getitem__(self, i):
            ids = torch.randint(0, 32000, (512,))
            return {"input_ids": ids, "labels": ids}

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                         num_hidden_layers=6, num_attention_heads=12, num_key_value_heads=4,
                         max_position_embeddings=1024)
    config._attn_implementation = "sdpa"
    args = TrainingArguments(output_dir="/tmp/memprof-trainer", per_device_train_batch_size=batch,
                             max_steps=steps, bf16=True, gradient_checkpointing=True,
                             report_to=[], save_strategy="no", logging_steps=1,
                             dataloader_num_workers=0, disable_tqdm=True)
    Trainer(model=LlamaForCausalLM(config), args=args, train_dataset=Tokens()).train()
    torch.cuda.synchronize()


def llama_trainer_ddp(batch, steps):
    """llama_trainer under torchrun: the Trainer's DDP, one GPU a rank."""
    llama_trainer(batch, steps)


def fragment(batch, steps):
    # Each step's temporary is larger than the last, so it never fits the free rest of an
    # earlier one, and the 8 MiB kept from each step is split off a freed temporary's block,
    # so no segment is ever whole again: reserved bytes grow far past allocated ones, and
    # under a cap freeing the cache cannot help (expandable segments would).
    kept = []
    for step in range(steps * 8):
        temporary = torch.empty((64 + 6 * step) * batch * MiB, dtype=torch.uint8, device="cuda")
        temporary.fill_(1)
        del temporary
        kept.append(torch.empty(8 * MiB, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["resnet50", "resnet50_compiled", "gpt2", "gpt2_compiled",
                                        "llama_lora", "fragment", "gpt2_fsdp", "gpt2_ddp",
                                        "llama_trainer", "llama_trainer_ddp"])
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--cap", type=int, default=None, help="bytes the allocator may reserve")
    args = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    total = torch.cuda.get_device_properties(local).total_memory
    if args.cap is not None:
        # The allocator's own limit is int(fraction * total): the cap asked for, to the byte
        # or one under it.
        torch.cuda.set_per_process_memory_fraction(args.cap / total, local)
    oom = None
    try:
        {"resnet50": resnet50, "resnet50_compiled": resnet50_compiled, "gpt2": gpt2,
         "gpt2_compiled": gpt2_compiled, "llama_lora": llama_lora,
         "fragment": fragment, "gpt2_fsdp": gpt2_fsdp, "gpt2_ddp": gpt2_ddp,
         "llama_trainer": llama_trainer,
         "llama_trainer_ddp": llama_trainer_ddp}[args.workload](args.batch, args.steps)
    except torch.OutOfMemoryError as e:
        oom = str(e).splitlines()[0][:200]
    stats = torch.cuda.memory_stats(local)
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun: rank 0's numbers
    print("FIT " + json.dumps({
        "workload": args.workload, "batch": args.batch, "cap": args.cap, "total_memory": total,
        "fits": oom is None, "oom": oom,
        "reserved_bytes.all.peak": stats["reserved_bytes.all.peak"],
        "allocated_bytes.all.peak": stats["allocated_bytes.all.peak"],
        "num_alloc_retries": stats["num_alloc_retries"],
        # Out-of-memory errors the program caught (cuDNN's workspace requests fall back to
        # another algorithm): each freed the cache at a moment an uncapped trace does not have.
        "num_ooms": stats["num_ooms"],
        "segment.all.peak": stats["segment.all.peak"],
    }), flush=True)


if __name__ == "__main__":
    main()
