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
import threading

import _memprof_simulate_compile as compiled
import _memprof_simulate_cudnn as cudnn
import _memprof_simulate_device as gpu_device
import _memprof_simulate_distributed as distributed
import _memprof_simulate_ledger as ledger
import _memprof_simulate_torch as torch_as_cuda

_trace_path = None
_modes = ()


class _Inside(threading.local):
    n = 0


def _zero_scalar(torch, t):
    if t.dtype == torch.bool:
        return False
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return 0.0
    return 0


def install(gpu, trace_path, is_user_file, ranks=0):
    """Simulates `gpu` (a GPU model of memprof's table, as a dict) for the rest of the run, as
    rank 0 of `ranks` when not 0; the trace goes to `trace_path` at the end (finish)."""
    global _trace_path, _modes
    _trace_path = trace_path
    import torch

    ledger.start(gpu, is_user_file, torch, ranks)
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        FakeTensor,
        FakeTensorMode,
    )
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
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
        # What inductor's generated code calls (into its own buffers).
        aten.mm.out, aten.addmm.out, aten.bmm.out, aten.baddbmm.out,
    }
    # Made from options alone (no tensor among their arguments); while simulate_device's
    # factories_on_gpu is on, those of floating point are the simulated GPU's (the gradient
    # buckets a reducer makes; its index tensors, which C++ reads back, stay the CPU's).
    factories = {aten.empty.memory_format, aten.zeros.default, aten.empty_strided.default,
                 aten.full.default, aten.ones.default}
    get_mode, fake_key = torch._C._get_dispatch_mode, torch._C._TorchDispatchModeKey.FAKE
    tracing_context = torch._guards.TracingContext.try_get
    # Per thread: > 0 while the fake mode computes (fake tensors tell it their real device).
    inside = _Inside()

    def is_cuda(d):
        if isinstance(d, torch.device):
            return d.type == "cuda"
        if isinstance(d, str):
            return d.startswith("cuda")
        return False

    # A simulated tensor is a fake tensor on the CPU to libtorch (autograd runs its backward as
    # the CPU's: CUDA's needs a driver), and on cuda:0 to the program.
    # Fake tensors of other fake modes (a subclass's shape propagation, a tracer's) are left as
    # they are: not simulated tensors, not allocations.
    real_repr = FakeTensor.__repr__

    def simulated(t):
        return isinstance(t, FakeTensor) and t.fake_mode is fake

    def present_as_gpu(cls, is_simulated):
        """Instances of `cls` that `is_simulated` names are on cuda:0 to the program; to the
        fake mode computing (and to libtorch) they are where libtorch made them, the CPU."""

        def seen_by_program(self):
            # Dynamo traces them as the CPU's (simulate_compile.py).
            return not inside.n and is_simulated(self) and tracing_context() is None

        for name, seen in (("device", cuda0), ("is_cuda", True), ("is_cpu", False),
                           ("is_meta", False)):
            real = getattr(cls, name)
            setattr(cls, name, property(lambda self, real=real, seen=seen: seen
                                        if seen_by_program(self) else real.__get__(self)))
        real_get_device = cls.get_device
        cls.get_device = lambda self: 0 if seen_by_program(self) else real_get_device(self)

    present_as_gpu(FakeTensor, lambda t: t.fake_mode is fake)
    FakeTensor.__repr__ = lambda self: real_repr(self) if self.fake_mode is not fake else (
        f"tensor(<simulated>, size={tuple(self.shape)}, dtype={self.dtype}, device='cuda:0')")
    fake_dispatch = FakeTensor.__torch_dispatch__.__func__

    def dispatch_as_cpu(cls, func, types, args=(), kwargs=None):
        # Reached without memprof's mode (a tensor subclass's own ops on simulated tensors):
        # the fake mode sees their real device, as under the mode.
        inside.n += 1
        try:
            return fake_dispatch(cls, func, types, args, kwargs)
        finally:
            inside.n -= 1

    FakeTensor.__torch_dispatch__ = classmethod(dispatch_as_cpu)

    def value_read(what):
        """The program read a simulated tensor's values (`what` stood in for them), at its line;
        on a GPU it would have waited for the GPU there."""
        ledger.note(what)
        gpu_device.waited()

    def placeholder(t):
        """A simulated tensor's values, read on the CPU: zeros of its shape and dtype."""
        value_read("values copied to the CPU: zeros were used")
        return torch.zeros(tuple(t.shape), dtype=t.dtype)

    def parse_to(args, kwargs):
        """`.to`'s arguments as (device, dtype, non_blocking, memory_format, copy), as torch
        parses them; a simulated tensor given as the model is on cuda:0 (libtorch would read
        the CPU)."""
        kwargs = dict(kwargs)
        copy = kwargs.pop("copy", False)
        rest = list(args[1:])
        other = rest[0] if rest else kwargs.get("other")
        if simulated(other):
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
                    simulated(args[0]):
                out = torch_as_cuda.cross_entropy_as_cuda(torch, args, kwargs)
                if out is not None:
                    return out
            if args and simulated(args[0]):
                if name in ("item", "__float__", "__int__", "__bool__", "__index__",
                            "__complex__") and args[0].numel() == 1:
                    # Read here, above libtorch, so that what it warns of (a scalar of a tensor
                    # that requires grad) is not said from memprof's frame.
                    value_read("a value (.item(), bool(), a Python number): 0 was used")
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
        @classmethod
        def ignore_compile_internals(cls):
            # Dynamo traces frames with the mode on (else it skips them all), and turns it off
            # while it compiles: the compiled code's ops come back to it when they run.
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if get_mode(fake_key) is not None:
                # A fake mode of torch's own is on (DTensor's shape propagation): its tensors
                # are not the program's, and it makes them.
                return func(*args, **kwargs)
            leaves = tree_flatten((args, kwargs))[0]
            has_fake = any(simulated(a) for a in leaves)
            made_as = None
            # Autograd makes the zeros of a custom Function's output that no gradient reached
            # (a compiled graph's logits, returned beside the loss) from the output's options:
            # a simulated output's are the CPU's to libtorch, and these zeros the GPU's.
            zero_grad = False
            if not has_fake and kwargs.get("device") == cpu and func in factories and \
                    (kwargs.get("dtype") or torch.get_default_dtype()).is_floating_point:
                made_as = gpu_device.cpu_factories_on_gpu()
                zero_grad = func is aten.zeros.default and ledger.in_custom_backward()
            to_cuda = is_cuda(kwargs.get("device")) or made_as is not None or zero_grad
            if not has_fake and not to_cuda:
                if any(wraps_fake(a) for a in leaves):
                    # A tensor subclass (DTensor) around simulated tensors: it runs the op on
                    # them, each of which comes back here.
                    return NotImplemented
                return func(*args, **kwargs)
            if func is aten._fused_sdp_choice.default:
                return torch_as_cuda.sdpa_choice(torch, gpu, args, kwargs)
            if func is aten._local_scalar_dense.default:
                value_read("a value (.item(), bool(), a Python number): 0 was used")
                return _zero_scalar(torch, args[0])
            if func is aten._to_copy.default and simulated(args[0]) and to_cuda \
                    and kwargs.get("dtype") in (None, args[0].dtype):
                # Already on the GPU: the same storage, as torch's .to gives it.
                inside.n += 1
                try:
                    with fake:
                        return aten.alias.default(args[0])
                finally:
                    inside.n -= 1
            if func is aten.copy_.default and not simulated(args[0]):
                value_read("values copied to the CPU: zeros were used")
                return args[0].zero_()
            if func is flash_for_cpu and kwargs.get("attn_mask") is None:
                return flash_as_cuda(args, kwargs)
            role = made_as
            if to_cuda and args and isinstance(args[0], torch.nn.Parameter):
                role = "parameters"
            if to_cuda:
                kwargs = dict(kwargs, device=cpu)
            inside.n += 1
            try:
                with fake:
                    out = func(*args, **kwargs)
            except (DynamicOutputShapeException, DataDependentOutputException):
                out = value_dependent(func, args, kwargs)
            finally:
                inside.n -= 1

            def track(value):
                for t in tree_flatten(value)[0]:
                    if simulated(t):
                        ledger.track(t, role)

            # A convolution's outputs, each followed by its cuDNN plan's workspace.
            if func is aten.convolution.default:
                cudnn.convolution(torch, args, out, track)
            elif func is aten.convolution_backward.default:
                cudnn.convolution_backward(torch, args, out, track)
            else:
                track(out)
            if func in products:
                # After the product's output, as cuBLAS asks for them (measured on an H100).
                ledger.workspace("cublas")
                if func in (aten.addmm.default, aten.addmm.out) and args[0].dim() == 1 and \
                        kwargs.get("beta", 1) == 1:
                    ledger.workspace("cublaslt")
            return out

    def wraps_fake(a):
        if not is_traceable_wrapper_subclass(a):
            return False
        names, _ = a.__tensor_flatten__()
        return any(simulated(getattr(a, n, None)) or wraps_fake(getattr(a, n, None))
                   for n in names)

    flash_for_cpu = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    flash_for_cpu = getattr(flash_for_cpu, "default", None)

    def flash_as_cuda(args, kwargs):
        """SDPA's flash backend as CUDA runs it: libtorch sees CPU tensors and chose the CPU's
        flash kernel; CUDA's also keeps its random generator's state for the backward (two
        small device tensors, live as long as the saved outputs)."""
        q, k, v = args[:3]
        dropout = args[3] if len(args) > 3 else kwargs.get("dropout_p", 0.0)
        causal = args[4] if len(args) > 4 else kwargs.get("is_causal", False)
        inside.n += 1
        try:
            with fake:
                outs = aten._scaled_dot_product_flash_attention.default(
                    q, k, v, dropout, causal, False, scale=kwargs.get("scale"))
        finally:
            inside.n -= 1
        out, logsumexp = outs[0], outs[1]
        kept = [t for t in outs[2:] if simulated(t)]
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
            if simulated(a):
                return torch.ones(tuple(a.shape), dtype=a.dtype)
            return a

        inside.n -= 1
        try:
            r_args, r_kwargs = tree_map(real, (args, kwargs))
            out = func(*r_args, **r_kwargs)
        finally:
            inside.n += 1
        with fake:
            return tree_map(
                lambda t: aten.clone.default(fake.from_tensor(t))
                if isinstance(t, torch.Tensor) else t, out)

    # A simulated storage's address (a fake tensor's is 0, with a warning): its own, as a GPU
    # storage's would be (FSDP1 asks whether its flat parameter and shard share memory).
    def simulated_address(storage):
        return storage._cdata if ledger.is_simulated_storage(storage) else None

    tensor_data_ptr, storage_data_ptr = FakeTensor.data_ptr, torch.UntypedStorage.data_ptr

    def data_ptr(self):
        address = simulated_address(self.untyped_storage()) if simulated(self) else None
        if address is None:
            return tensor_data_ptr(self)
        return address + self.storage_offset() * self.element_size()

    def storage_address(self):
        address = simulated_address(self)
        return storage_data_ptr(self) if address is None else address

    FakeTensor.data_ptr = data_ptr
    torch.UntypedStorage.data_ptr = storage_address
    storage_resize = torch.UntypedStorage.resize_

    def resize_(self, nbytes):
        out = storage_resize(self, nbytes)
        ledger.resized(self, nbytes)
        return out

    torch.UntypedStorage.resize_ = resize_
    gpu_device.install(torch, gpu)
    cudnn.install(gpu)
    torch_as_cuda.install(torch)
    compiled.install(torch, gpu, lambda args, kwargs: torch_as_cuda.sdpa_choice(
        torch, gpu, args, kwargs))
    distributed.install(torch, ranks)
    for cls in distributed.tensor_subclasses(torch):
        # A subclass around simulated tensors (DTensor): libtorch made its wrapper on theirs.
        present_as_gpu(cls, wraps_fake)
    _modes = (SimulatedGpuFunctions(), SimulatedGpu())
    for m in _modes:
        m.__enter__()
    _install_threads()


def _install_threads():
    """torch's modes are per thread: a thread the program starts (a prefetcher that moves
    batches to the GPU) runs under the simulation's too."""
    bootstrap = threading.Thread._bootstrap_inner

    def under_the_simulation(self):
        for m in _modes:
            m.__enter__()
        bootstrap(self)

    threading.Thread._bootstrap_inner = under_the_simulation


def finish(torch_version):
    """Writes the trace (None when the simulation was not installed)."""
    if _trace_path is not None:
        ledger.write_trace(_trace_path, torch_version)
