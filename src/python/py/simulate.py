# `memprof run --simulate-gpu NAME`, the Python half: the program runs on a machine without that
# GPU (or without any), its CUDA tensors simulated, and every allocation and free the CUDA caching
# allocator would have seen is recorded (simulate_ledger.py) and written as the allocation trace
# `memprof fit` replays (model/trace.rs).
#
# This file owns the two modes that stay on for the run. CUDA tensors are torch's fake tensors
# (FakeTensorMode: shapes, dtypes, strides, no memory, no kernels), made where the program asks
# for the device (factories with device="cuda", `.to("cuda")`, `.cuda()`, torch.tensor); every op
# with a fake input runs under the fake mode, and each new storage among its outputs is an
# allocation. To libtorch a simulated tensor is the CPU's (autograd runs its backward on the
# calling thread, as the CPU's: CUDA's device threads need a driver); to the program it is
# cuda:0. Values read back are placeholders, and the ledger notes where. torch.cuda answers as
# the GPU (simulate_device.py); torch's Python behaves as on CUDA where it would not
# (simulate_torch.py).
import _memprof_simulate_device as gpu_device
import _memprof_simulate_ledger as ledger
import _memprof_simulate_torch as torch_as_cuda

_trace_path = None
_modes = ()


def _zero_scalar(torch, t):
    if t.dtype == torch.bool:
        return False
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return 0.0
    return 0


def install(gpu, trace_path, is_user_file):
    """Simulates `gpu` (a GPU model of memprof's table, as a dict) for the rest of the run; the
    trace goes to `trace_path` at the end (finish)."""
    global _trace_path, _modes
    _trace_path = trace_path
    import torch

    ledger.start(gpu, is_user_file, torch)
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        FakeTensor,
        FakeTensorMode,
    )
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_map

    class NoDeviceFakeMode(FakeTensorMode):
        # torch.cuda.is_available() answers yes from now on; the fake mode must still never
        # touch a device: no constant propagation through device copies.
        @property
        def avoid_device_init(self):
            return True

    fake = NoDeviceFakeMode(allow_non_fake_inputs=True)
    # CUDA's device guard answers as a device that needs no driver (what FakeTensorMode sets
    # while it is entered, torch 2.10+): nothing asks the driver for the current device.
    getattr(torch._C, "_ensureCUDADeviceGuardSet", lambda: None)()
    aten = torch.ops.aten
    cpu = torch.device("cpu")
    cuda0 = torch.device("cuda", 0)
    products = {
        aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
        aten.addmv.default, aten.mv.default, aten._addmm_activation.default,
    }
    inside = [0]  # > 0 while the fake mode computes: fake tensors tell it their real device

    def is_cuda(d):
        if isinstance(d, torch.device):
            return d.type == "cuda"
        if isinstance(d, str):
            return d.startswith("cuda")
        return False

    # A simulated tensor is a fake tensor on the CPU to libtorch (autograd runs its backward as
    # the CPU's: CUDA's needs a driver), and on cuda:0 to the program.
    real_device = FakeTensor.device

    def device_seen(self):
        if inside[0]:
            return real_device.fget(self)
        return cuda0

    FakeTensor.device = property(device_seen)
    FakeTensor.is_cuda = property(lambda self: not inside[0])
    FakeTensor.is_cpu = property(lambda self: bool(inside[0]))
    FakeTensor.get_device = lambda self: 0 if not inside[0] else -1
    FakeTensor.__repr__ = lambda self: (
        f"tensor(<simulated>, size={tuple(self.shape)}, dtype={self.dtype}, device='cuda:0')")

    def placeholder(t):
        """A simulated tensor's values, read on the CPU: zeros of its shape and dtype."""
        ledger.note("values copied to the CPU: zeros were used")
        return torch.zeros(tuple(t.shape), dtype=t.dtype)

    def parse_to(args, kwargs):
        """`.to`'s arguments as (device, dtype, non_blocking, memory_format, copy), as torch
        parses them; a simulated tensor given as the model is on cuda:0 (libtorch would read
        the CPU)."""
        kwargs = dict(kwargs)
        copy = kwargs.pop("copy", False)
        rest = list(args[1:])
        other = rest[0] if rest else kwargs.get("other")
        if isinstance(other, FakeTensor):
            non_blocking = rest[1] if len(rest) > 1 else kwargs.get("non_blocking", False)
            return cuda0, other.dtype, non_blocking, None, copy
        return (*torch._C._nn._parse_to(*rest, **kwargs), copy)

    def to_gpu(name, args, kwargs):
        """A CPU tensor's `.to("cuda")` or `.cuda()`: the copy dispatched as such (torch's own
        `.to` asks the driver for the current device first). None: not to the GPU."""
        t = args[0]
        if name == "cuda":
            dtype, non_blocking, memory_format = None, kwargs.get("non_blocking", False), None
        else:
            device, dtype, non_blocking, memory_format, _ = parse_to(args, kwargs)
            if not is_cuda(device):
                return None
        return aten._to_copy.default(
            t, dtype=dtype or t.dtype, device=cuda0, non_blocking=non_blocking,
            memory_format=memory_format or torch.preserve_format)

    class SimulatedGpuFunctions(TorchFunctionMode):
        """What must be decided above autograd: copies between the CPU and the simulated GPU."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in ("to", "cuda") and args and isinstance(args[0], torch.Tensor) and \
                    not isinstance(args[0], FakeTensor):
                moved = to_gpu(name, args, kwargs)
                if moved is not None:
                    return moved
            if func in (torch.tensor, torch.as_tensor) and is_cuda(kwargs.get("device")):
                # From Python data: made on the CPU, then copied to the simulated GPU (torch's
                # constructor would initialise CUDA first).
                kwargs = dict(kwargs)
                device = kwargs.pop("device")
                grad = kwargs.pop("requires_grad", False)
                kwargs.pop("pin_memory", None)
                out = func(*args, **kwargs).to(device)
                return out.requires_grad_() if grad else out
            if func is torch.nn.functional.cross_entropy and args and \
                    isinstance(args[0], FakeTensor):
                out = torch_as_cuda.cross_entropy_as_cuda(torch, args, kwargs)
                if out is not None:
                    return out
            if args and isinstance(args[0], FakeTensor):
                if name in ("item", "__float__", "__int__", "__bool__", "__index__",
                            "__complex__") and args[0].numel() == 1:
                    # Read here, above libtorch, so that what it warns of (a scalar of a tensor
                    # that requires grad) is not said from memprof's frame.
                    ledger.note("a value (.item(), bool(), a Python number): 0 was used")
                    value = _zero_scalar(torch, args[0])
                    return {"__float__": float, "__int__": int, "__index__": int,
                            "__complex__": complex}.get(name, lambda v: v)(value)
                if name in ("numpy", "tolist"):
                    return getattr(placeholder(args[0]), name)()
                if name == "cpu":
                    return placeholder(args[0])
                if name == "cuda" and not kwargs.get("memory_format"):
                    return args[0]  # on the GPU already: itself, as torch gives it
                if name == "to":
                    t = args[0]
                    device, dtype, non_blocking, memory_format, copy = parse_to(args, kwargs)
                    if device is not None and not is_cuda(device):
                        out = placeholder(t)
                        return out if dtype is None else out.to(dtype)
                    if device is not None:
                        if dtype in (None, t.dtype) and not copy and memory_format is None:
                            return t  # on the GPU already: itself, as torch gives it
                        # A copy on the simulated GPU, dispatched as such (torch's own `.to`
                        # to a CUDA device asks the driver for it first); its device to libtorch.
                        return aten._to_copy.default(
                            t, dtype=dtype or t.dtype, device=cpu, non_blocking=non_blocking,
                            memory_format=memory_format or torch.preserve_format)
            return func(*args, **kwargs)

    class SimulatedGpu(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            leaves = tree_flatten((args, kwargs))[0]
            has_fake = any(isinstance(a, FakeTensor) for a in leaves)
            to_cuda = is_cuda(kwargs.get("device"))
            if not has_fake and not to_cuda:
                return func(*args, **kwargs)
            if func is aten._fused_sdp_choice.default:
                return torch_as_cuda.sdpa_choice(torch, gpu, args, kwargs)
            if func is aten._local_scalar_dense.default:
                ledger.note("a value (.item(), bool(), a Python number): 0 was used")
                return _zero_scalar(torch, args[0])
            if func is aten._to_copy.default and isinstance(args[0], FakeTensor) and to_cuda \
                    and kwargs.get("dtype") in (None, args[0].dtype):
                # Already on the GPU: the same storage, as torch's .to gives it.
                inside[0] += 1
                try:
                    with fake:
                        return aten.alias.default(args[0])
                finally:
                    inside[0] -= 1
            if func is aten.copy_.default and not isinstance(args[0], FakeTensor):
                ledger.note("values copied to the CPU: zeros were used")
                return args[0].zero_()
            if func is flash_for_cpu and kwargs.get("attn_mask") is None:
                return flash_as_cuda(args, kwargs)
            role = None
            if to_cuda and isinstance(args[0], torch.nn.Parameter):
                role = "parameters"
            if to_cuda:
                kwargs = dict(kwargs, device=cpu)
            inside[0] += 1
            try:
                with fake:
                    out = func(*args, **kwargs)
            except (DynamicOutputShapeException, DataDependentOutputException):
                out = value_dependent(func, args, kwargs)
            finally:
                inside[0] -= 1
            for t in tree_flatten(out)[0]:
                if isinstance(t, FakeTensor):
                    ledger.track(t, role)
            if func in products:
                # After the product's output, as cuBLAS asks for them (measured on an H100).
                ledger.workspace("cublas")
                if func is aten.addmm.default and args[0].dim() == 1 and \
                        kwargs.get("beta", 1) == 1:
                    ledger.workspace("cublaslt")
            return out

    flash_for_cpu = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    flash_for_cpu = getattr(flash_for_cpu, "default", None)

    def flash_as_cuda(args, kwargs):
        """SDPA's flash backend as CUDA runs it: libtorch sees CPU tensors and chose the CPU's
        flash kernel; CUDA's also keeps its random generator's state for the backward (two
        small device tensors, live as long as the saved outputs)."""
        q, k, v = args[:3]
        dropout = args[3] if len(args) > 3 else kwargs.get("dropout_p", 0.0)
        causal = args[4] if len(args) > 4 else kwargs.get("is_causal", False)
        inside[0] += 1
        try:
            with fake:
                outs = aten._scaled_dot_product_flash_attention.default(
                    q, k, v, dropout, causal, False, scale=kwargs.get("scale"))
        finally:
            inside[0] -= 1
        out, logsumexp = outs[0], outs[1]
        kept = [t for t in outs[2:] if isinstance(t, FakeTensor)]
        for t in (out, logsumexp, *kept):
            ledger.track(t)
        logsumexp._memprof_saved_with = kept
        return out, logsumexp

    def value_dependent(func, args, kwargs):
        """An op whose output's size depends on its inputs' values (nonzero, a boolean mask,
        unique): run on the CPU with every element one (nonzero, true), the largest size such
        an op can give, and its output made a simulated tensor of that size."""
        ledger.note(f"a size that depends on values ({func.__name__}): every element "
                    "counted as nonzero, the largest size")

        def real(a):
            if isinstance(a, FakeTensor):
                return torch.ones(tuple(a.shape), dtype=a.dtype)
            return a

        inside[0] -= 1
        try:
            r_args, r_kwargs = tree_map(real, (args, kwargs))
            out = func(*r_args, **r_kwargs)
        finally:
            inside[0] += 1
        with fake:
            return tree_map(
                lambda t: aten.clone.default(fake.from_tensor(t))
                if isinstance(t, torch.Tensor) else t, out)

    gpu_device.install(torch, gpu)
    torch_as_cuda.install(torch)
    _modes = (SimulatedGpuFunctions(), SimulatedGpu())
    for m in _modes:
        m.__enter__()


def finish(torch_version):
    """Writes the trace (None when the simulation was not installed)."""
    if _trace_path is not None:
        ledger.write_trace(_trace_path, torch_version)
