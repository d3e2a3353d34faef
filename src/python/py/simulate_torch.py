# `--simulate-gpu`'s adjustments to torch's own Python: where simulated tensors (the CPU's to
# libtorch, cuda:0 to the program) would make torch behave as on the CPU, it behaves as on
# CUDA: CUDA autocast (and its cross-entropy), SDPA's backend choice on that GPU, moving a model
# to the device (tied weights, a model moved again), foreach ops' device groups; the optimizer's
# steps name parameters, gradients and state; torch.save writes placeholders.
# (torch.distributed: simulate_distributed.py.)
import _memprof_simulate_ledger as ledger


def install(torch):
    _install_autocast(torch)
    _install_module_moves(torch)
    _install_swaps(torch)
    _install_grouping(torch)
    _install_foreach_defaults(torch)
    _install_roles(torch)
    _install_save(torch)


# SDPA's backends, numbered as torch's SDPBackend (sdp_utils.h).
_SDPA_MATH, _SDPA_FLASH, _SDPA_EFFICIENT = 0, 1, 2


def sdpa_choice(torch, gpu, args, kwargs):
    """The backend torch picks on `gpu` for these inputs, in its default order (flash,
    memory-efficient, math): flash needs sm80+, fp16/bf16, a head dimension of at most 256 and a
    multiple of 8, and no explicit mask; memory-efficient needs sm50+ and a head dimension that is
    a multiple of 8 (4 for fp32)."""
    q, k, v = args[0], args[1], args[2]
    mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
    major = gpu["major"]
    head = q.shape[-1]
    same = q.dtype == k.dtype == v.dtype
    if (major >= 8 and mask is None and same and q.dtype in (torch.float16, torch.bfloat16)
            and head <= 256 and head % 8 == 0 and v.shape[-1] == head):
        return _SDPA_FLASH
    if major >= 5 and same and head % (4 if q.dtype == torch.float32 else 8) == 0:
        return _SDPA_EFFICIENT
    return _SDPA_MATH


# The dtypes of the CUDA autocast regions open now (innermost last).
_cuda_autocast = []


def _install_autocast(torch):
    """`torch.autocast("cuda")` casts as CPU autocast does: the simulated tensors are the CPU's
    to libtorch. The two lists of ops agree on matrix products, convolutions and attention
    (cross-entropy is done as CUDA does: cross_entropy_as_cuda)."""
    from torch.amp import autocast_mode

    init = autocast_mode.autocast.__init__
    enter, exit_ = autocast_mode.autocast.__enter__, autocast_mode.autocast.__exit__

    def cuda_as_cpu(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self._memprof_cuda = device_type == "cuda"
        if device_type == "cuda":
            device_type = "cpu"
            if dtype is None:
                dtype = torch.float16  # CUDA autocast's default
        return init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def entered(self):
        out = enter(self)
        if getattr(self, "_memprof_cuda", False) and self._enabled:
            _cuda_autocast.append(self.fast_dtype)
        return out

    def exited(self, *args):
        if getattr(self, "_memprof_cuda", False) and self._enabled and _cuda_autocast:
            _cuda_autocast.pop()
        return exit_(self, *args)

    autocast_mode.autocast.__init__ = cuda_as_cpu
    autocast_mode.autocast.__enter__ = entered
    autocast_mode.autocast.__exit__ = exited


def cross_entropy_as_cuda(torch, args, kwargs):
    """F.cross_entropy under CUDA autocast, as CUDA runs it: cross_entropy is on none of CUDA
    autocast's lists, so its log_softmax keeps the input's dtype (the dtype it passes), and
    nll_loss, on the fp32 list, casts that to float32. (CPU autocast lists cross_entropy as
    fp32: its input would be cast first, a larger block.) None where this does not apply."""
    names = ("input", "target", "weight", "size_average", "ignore_index", "reduce",
             "reduction", "label_smoothing")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    x = bound.get("input")
    if (not _cuda_autocast or x is None or x.dtype not in (torch.float16, torch.bfloat16)
            or bound.get("label_smoothing", 0.0) != 0.0 or bound.get("size_average") is not None
            or bound.get("reduce") is not None or not x.is_floating_point()
            or bound["target"].is_floating_point()):
        return None
    with torch.autocast("cpu", enabled=False):
        logp = torch.log_softmax(x, 1 if x.dim() > 1 else 0, dtype=x.dtype)
        weight = bound.get("weight")
        return torch.nn.functional.nll_loss(
            logp.float(), bound["target"], None if weight is None else weight.float(),
            ignore_index=bound.get("ignore_index", -100),
            reduction=bound.get("reduction", "mean"))


def _install_module_moves(torch):
    """`model.to("cuda")` keeps a tied weight one parameter, moved once. torch moves a CPU
    parameter to CUDA by giving the same Parameter new data; a fake tensor cannot be a real
    one's data, so torch makes a new Parameter for each module that holds it: each tensor is
    moved once here, and the modules that shared a parameter share its new one."""
    from torch._subclasses.fake_tensor import FakeTensor

    # A fake tensor is never a real one's new `.data` (torch 2.15 says so in Module._apply
    # itself; older releases would make the parameter a meta tensor in place).
    compatible = torch._has_compatible_shallow_copy_type

    def not_across_fakes(a, b):
        if isinstance(a, FakeTensor) != isinstance(b, FakeTensor):
            return False
        return compatible(a, b)

    torch._has_compatible_shallow_copy_type = not_across_fakes
    apply = torch.nn.Module._apply
    depth = [0]

    def moved_once(self, fn, *args, **kwargs):
        if depth[0]:
            return apply(self, fn, *args, **kwargs)
        results = {}

        def once(t):
            if isinstance(t, FakeTensor):
                return fn(t)  # already the GPU's (torch swaps it in place)
            key = id(t)
            if key not in results:
                results[key] = (t, fn(t))  # t kept alive: its id stays its own
            return results[key][1]

        before = [(m, name, p) for m in self.modules()
                  for name, p in m._parameters.items() if p is not None]
        depth[0] += 1
        try:
            out = apply(self, once, *args, **kwargs)
        finally:
            depth[0] -= 1
        first = {}
        for m, name, p in before:
            new = m._parameters.get(name)
            if new is None:
                continue
            if id(p) in first:
                m._parameters[name] = first[id(p)]
            else:
                first[id(p)] = new
        return out

    torch.nn.Module._apply = moved_once


def _install_swaps(torch):
    """torch.utils.swap_tensors (Module._apply on a simulated model swaps each parameter in
    place) refuses a tensor with weakrefs, and simulated tensors have them (the ledger's
    finalizer, the fake mode's memo): a simulated parameter takes its new contents as `.data`
    instead, the same object holding the new storage, as a swap would leave it."""
    import torch.utils
    from torch._subclasses.fake_tensor import FakeTensor

    swap = torch.utils.swap_tensors

    def swap_or_take(t1, t2):
        if not (isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor)):
            return swap(t1, t2)
        with torch.no_grad():
            t1.data = t2
        ledger.retracked(t1)

    torch.utils.swap_tensors = swap_or_take


def _install_grouping(torch):
    """foreach ops' grouping of tensors by device (clipping, optimizers) reads libtorch's device,
    the CPU for a simulated tensor: its groups are named cuda:0, as on the GPU, so that what is
    moved "to the group's device" stays on the simulated GPU."""
    from torch._subclasses.fake_tensor import FakeTensor

    group = torch._C._group_tensors_by_device_and_dtype
    cuda0 = torch.device("cuda", 0)

    def grouped(tensorlistlist, with_indices=False):
        out = group(tensorlistlist, with_indices)
        renamed = {}
        for (device, dtype), value in out.items():
            first = next((t for t in value[0][0] if t is not None), None) if value[0] else None
            if isinstance(first, FakeTensor):
                device = cuda0
            renamed[(device, dtype)] = value
        return renamed

    torch._C._group_tensors_by_device_and_dtype = grouped


def _install_foreach_defaults(torch):
    """Optimizers and clipping choose their foreach (or fused) kernels by the parameters' type
    (plain tensors and parameters only) and device: a simulated parameter is torch's fake tensor
    to Python, and takes the path a CUDA parameter takes (without this, AdamW's default ran
    per tensor: its temporaries one at a time, not a list at once)."""
    from torch._subclasses.fake_tensor import FakeTensor

    for module in ("torch.optim.optimizer", "torch.utils._foreach_utils"):
        try:
            types = getattr(__import__(module, fromlist=["_"]), "_foreach_supported_types")
        except (ImportError, AttributeError):
            continue
        if FakeTensor not in types:
            types.append(FakeTensor)


def _install_roles(torch):
    """Names parameters, gradients and optimizer state at each optimizer step."""
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    def before_step(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for p in group["params"]:
                ledger.name_role(p, "parameters")
                if p.grad is not None:
                    ledger.name_role(p.grad, "gradients")

    def after_step(optimizer, args, kwargs):
        for state in optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    ledger.name_role(value, "optimizer state")

    register_optimizer_step_pre_hook(before_step)
    register_optimizer_step_post_hook(after_step)


def placeholder(shape, dtype, requires_grad):
    """What torch.load gives back for a simulated tensor that torch.save wrote: zeros of its
    shape and dtype, on the CPU."""
    import torch

    return torch.zeros(shape, dtype=dtype, requires_grad=requires_grad)


def _install_save(torch):
    """torch.save of a simulated tensor (a checkpoint, a state dict): it has no values, so it is
    written as a placeholder (zeros of its shape and dtype when loaded, on the CPU, also with
    torch.load's weights_only), and the line that saved it is noted."""
    from torch._subclasses.fake_tensor import FakeTensor

    def reduce(self, protocol):
        ledger.note("torch.save: a simulated tensor written as zeros of its shape (it has no "
                    "values)")
        return (placeholder, (tuple(self.shape), self.dtype, self.requires_grad))

    FakeTensor.__reduce_ex__ = reduce
    allow = getattr(getattr(torch, "serialization", None), "add_safe_globals", None)
    if allow is not None:
        allow([placeholder])
