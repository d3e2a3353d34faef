"""cuDNN's convolution workspaces on a real GPU (docs/fit.md, "Without a GPU"): every distinct
convolution of a set of torchvision models' training steps, each measured alone on the GPU, its
forward, its input gradient and its weight gradient: the bytes the caching allocator lends cuDNN
for the call beside the call's own output (the workspace of the plan cuDNN's heuristics chose,
allocated and freed inside the call). What `--simulate-gpu` models them from.

    python3 scripts/cudnn_workspaces.py OUT.json [MODEL:BATCH[:DTYPE[:cl]]...]   # on the GPU
    python3 scripts/cudnn_workspaces.py --module OUT.json src/python/py/cudnn_sm90.py  # here

`--module` writes the measurements as the data module the simulation reads.
"""
import json
import sys

MODELS = ["resnet50:16", "resnet50:32", "resnet50:48", "resnet50:64", "resnet50:128",
          "resnet18:64", "resnet101:16", "vgg16:16", "mobilenet_v3_large:64", "efficientnet_b0:32",
          "resnet50:32:bfloat16", "resnet50:64:bfloat16", "convnext_tiny:32", "densenet121:32",
          # channels last (what inductor's layout optimization gives a compiled conv net)
          "resnet50:32:float32:cl", "resnet50:64:float32:cl", "resnet50:64:bfloat16:cl"]


def convolutions(name, batch, dtype, channels_last=False):
    """The distinct convolutions a training step of torchvision's `name` runs, with how often
    (the model and its input channels-last when `channels_last`)."""
    import torch
    import torchvision
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten

    class Convolutions(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is aten.convolution.default:
                x, w, _, stride, padding, dilation, transposed, output_padding, groups = args
                key = (tuple(x.shape), tuple(w.shape), tuple(stride), tuple(padding),
                       tuple(dilation), bool(transposed), tuple(output_padding), int(groups),
                       str(x.dtype).replace("torch.", ""),
                       x.is_contiguous(memory_format=torch.channels_last)
                       and not x.is_contiguous())
                self.seen[key] = self.seen.get(key, 0) + 1
            return func(*args, **(kwargs or {}))

    model = getattr(torchvision.models, name)().cuda()
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    mode = Convolutions()
    with mode:
        with torch.autocast("cuda", dtype=getattr(torch, dtype), enabled=dtype != "float32"):
            out = model(x)
        out.float().sum().backward()
    del model, x, out
    torch.cuda.empty_cache()
    return mode.seen


def transient(torch, call):
    """The allocations the call made and gave back before it returned, in order, at the sizes
    it asked for (torch's allocation history: the statistics would count the allocator's
    blocks, which can be larger): cuDNN's workspace."""
    torch.cuda.synchronize()
    seen = len(torch.cuda.memory._snapshot()["device_traces"][0])
    out = call()
    torch.cuda.synchronize()
    trace = torch.cuda.memory._snapshot()["device_traces"][0][seen:]
    del out
    made, given_back = {}, []
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            made[e["addr"]] = (i, e["size"])
        elif e["action"] == "free_requested" and e["addr"] in made:
            given_back.append(made.pop(e["addr"]))
    return [size for _, size in sorted(given_back)]


def measure(key):
    import torch

    aten = torch.ops.aten
    xs, ws, stride, padding, dilation, transposed, output_padding, groups, dtype, cl = key
    fmt = torch.channels_last if cl else torch.contiguous_format
    dt = getattr(torch, dtype)
    x = torch.randn(xs, device="cuda", dtype=dt).contiguous(memory_format=fmt)
    w = torch.randn(ws, device="cuda", dtype=dt).contiguous(memory_format=fmt)
    y = aten.convolution(x, w, None, stride, padding, dilation, transposed, output_padding, groups)
    g = torch.randn_like(y)
    args = (stride, padding, dilation, transposed, output_padding, groups)

    def forward():
        return (aten.convolution(x, w, None, *args),)

    def backward(mask):
        return lambda: aten.convolution_backward(g, x, w, None, *args, mask)

    out = {}
    for name, call in (("forward", forward), ("input", backward([True, False, False])),
                       ("weight", backward([False, True, False]))):
        call()  # the plan chosen and cached first, as in a training step's first call
        out[name] = [transient(torch, call) for _ in range(2)]
    return out


def main():
    if sys.argv[1] == "--module":
        return write_module(sys.argv[2], sys.argv[3])
    import torch

    path = sys.argv[1]
    wanted = sys.argv[2:] or MODELS
    rows = []
    seen = {}
    for spec in wanted:
        name, batch, *rest = spec.split(":")
        dtype = rest[0] if rest else "float32"
        for key, calls in convolutions(name, int(batch), dtype, rest[1:] == ["cl"]).items():
            seen.setdefault(key, []).append((spec, calls))
    torch.cuda.memory._record_memory_history(max_entries=10_000_000)
    for key, uses in seen.items():
        try:
            m = measure(key)
        except torch.OutOfMemoryError:
            continue
        rows.append({"x": key[0], "w": key[1], "stride": key[2], "padding": key[3],
                     "dilation": key[4], "transposed": key[5], "output_padding": key[6],
                     "groups": key[7], "dtype": key[8], "channels_last": key[9],
                     "models": uses, "workspace": m})
        torch.cuda.empty_cache()
    meta = {"device": torch.cuda.get_device_name(0),
            "capability": list(torch.cuda.get_device_capability(0)),
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}
    with open(path, "w") as f:
        json.dump({"meta": meta, "convolutions": rows}, f)
    print(f"cudnn_workspaces: {len(rows)} convolutions, {meta}")


def write_module(raw, out):
    """The measurements as the simulation's data, one convolution a line (a string that
    simulate_cudnn.py parses when a run simulates this architecture: compiling them as Python
    literals would cost every memprof run tens of milliseconds), from each call's second run."""
    with open(raw) as f:
        data = json.load(f)
    meta = data["meta"]
    sm = f"sm{meta['capability'][0]}{meta['capability'][1]}"
    lines = [
        f"# cuDNN's convolution workspaces on {sm}, measured: written by "
        "scripts/cudnn_workspaces.py --module",
        f"# from a run on an {meta['device']} (torch {meta['torch']}, cuDNN {meta['cudnn']}); "
        "not edited by hand.",
        "# Read by simulate_cudnn.py.",
        f"META = {meta!r}",
        "# One convolution a line: input shape; weight shape; stride; padding; dilation; groups;",
        "# dtype; channels last (1); the bytes lent to cuDNN (and given back within the call)",
        "# for the forward, the input's gradient and the weight's gradient (a+b: two loans).",
        'TABLE = """',
    ]
    join = ",".join
    for r in sorted(data["convolutions"], key=lambda r: (r["dtype"], r["w"], r["x"])):
        if r["transposed"]:
            continue
        w = r["workspace"]
        fields = [join(map(str, r["x"])), join(map(str, r["w"])), join(map(str, r["stride"])),
                  join(map(str, r["padding"])), join(map(str, r["dilation"])), str(r["groups"]),
                  r["dtype"], str(int(r["channels_last"])),
                  ",".join("+".join(map(str, w[d][1])) or "0"
                           for d in ("forward", "input", "weight"))]
        lines.append(";".join(fields))
    lines.append('"""')
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
