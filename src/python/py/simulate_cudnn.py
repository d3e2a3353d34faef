# `--simulate-gpu`'s cuDNN: the workspace cuDNN's plan takes from the caching allocator for each
# convolution on the GPU, allocated after the call's output and given back within the call
# (torch's Conv_v8.cpp: the plan's workspace through the caching allocator; the forward, the
# input's gradient and the weight's gradient each run their own plan). The plan is cuDNN's
# heuristics' choice on that architecture, so the sizes are measured there, per convolution
# (cudnn_sm90.py, written by scripts/cudnn_workspaces.py on an H200). A convolution the table
# lacks: the same layer measured at other batch sizes, the nearest scaled by the batch (an
# estimate, and the ledger says so); else none, said at its line.
import _memprof_simulate_ledger as ledger

_table = None  # key -> the loans of the forward, the input's gradient, the weight's gradient
_by_layer = None  # the key without the batch -> [(batch, sizes)]
_architecture = ""


def install(gpu):
    """The table for `gpu`'s architecture (memprof's GPU model, as a dict), if one was
    measured."""
    global _table, _by_layer, _architecture
    _architecture = gpu.get("cudnn_workspaces", "")
    if _architecture != "sm90":
        return
    import _memprof_cudnn_sm90 as measured

    _table = _parse(measured.TABLE)
    _by_layer = {}
    for key, sizes in _table.items():
        _by_layer.setdefault(_layer(key), []).append((key[0][0], sizes))


def _parse(text):
    """The table's lines (cudnn_sm90.py) as {key: (forward, input, weight)}."""
    table = {}
    for line in text.split():
        x, w, stride, padding, dilation, groups, dtype, channels_last, sizes = line.split(";")
        key = (_ints(x), _ints(w), _ints(stride), _ints(padding), _ints(dilation), int(groups),
               dtype, channels_last == "1")
        table[key] = tuple(tuple(int(v) for v in d.split("+") if v != "0")
                           for d in sizes.split(","))
    return table


def _ints(field):
    return tuple(int(v) for v in field.split(","))


def _layer(key):
    return (key[0][1:],) + key[1:]


def _key(torch, x, w, stride, padding, dilation, groups):
    channels_last = x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(
        memory_format=torch.channels_last)
    return (tuple(x.shape), tuple(w.shape), tuple(stride), tuple(padding), tuple(dilation),
            int(groups), str(x.dtype).replace("torch.", ""), channels_last)


def _sizes(key):
    """The workspaces of this convolution's three calls, and how they are known (None:
    measured)."""
    found = _table.get(key) if _table is not None else None
    if found is not None:
        return found, None
    if _table is None:
        return None, (f"cuDNN's convolution workspaces: none measured on this GPU's "
                      "architecture (none counted)")
    measured = _by_layer.get(_layer(key))
    if not measured:
        return None, ("cuDNN's convolution workspace: this convolution was not measured "
                      "(none counted)")
    batch = key[0][0]
    near, sizes = min(measured, key=lambda m: (abs(m[0] - batch), -m[0]))
    scaled = tuple(tuple(s * batch // near for s in loans) for loans in sizes)
    return scaled, (f"cuDNN's convolution workspace: estimated from this layer's at batch "
                    f"{near}, scaled by the batch")


def convolution(torch, args, out, track):
    """A convolution's forward ran (aten.convolution's arguments, its output): the output is
    allocated (`track`), then cuDNN's workspace taken and given back."""
    x, w, _, stride, padding, dilation, transposed, _, groups = args[:9]
    track(out)
    if transposed or not torch.backends.cudnn.enabled:
        return
    if torch.backends.cudnn.benchmark:
        ledger.note("cudnn.benchmark: the workspaces of the plans cuDNN's heuristics choose "
                    "(benchmarking's choice, and the plans it tries, are not modelled)")
    sizes, how = _sizes(_key(torch, x, w, stride, padding, dilation, groups))
    if how is not None:
        ledger.note(how)
    for size in sizes[0] if sizes is not None else ():
        ledger.scratch(size)


def convolution_backward(torch, args, outs, track):
    """A convolution's backward ran (aten.convolution_backward's arguments, its three
    gradients): cuDNN computes the input's gradient, then the weight's, each with its plan's
    workspace after its output; the bias's is a sum."""
    _, x, w, _, stride, padding, dilation, transposed, _, groups, mask = args[:11]
    grad_input, grad_weight, grad_bias = outs
    sizes, how = None, None
    if not transposed and torch.backends.cudnn.enabled:
        sizes, how = _sizes(_key(torch, x, w, stride, padding, dilation, groups))
    if how is not None:
        ledger.note(how)
    for i, grad in ((1, grad_input), (2, grad_weight)):
        if grad is not None:
            track(grad)
        for size in sizes[i] if sizes is not None and mask[i - 1] else ():
            ledger.scratch(size)
    if grad_bias is not None:
        track(grad_bias)
