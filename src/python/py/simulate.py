# `memprof run --simulate-gpu NAME`, the Python half: the program runs on a machine without that
# GPU (or without any), its CUDA tensors simulated, and every allocation and free that the CUDA
# caching allocator would have seen is recorded with its line and category, as the allocation
# trace `memprof fit` replays (model/trace.rs).
#
# How: CUDA tensors are torch's fake tensors (FakeTensorMode: shapes, dtypes, strides and the
# CUDA device, no memory, no kernels), made where the program asks for the device (factories with
# device="cuda", `.to("cuda")`, `.cuda()`), through a dispatch mode that stays on for the whole
# run. Every op with a fake input runs under the fake mode, and each new storage among its
# outputs is an allocation of its nbytes; it is freed when the last tensor on it is (a weakref on
# each tensor). Values read back (`.item()`, `.cpu()`, printing) are notes (zeros) and
# each line that read one is named. torch.cuda's device queries answer as the named GPU; autograd
# runs its backward on the calling thread (its device threads need a real device).
#
# What the GPU allocates that a fake tensor does not is added where the GPU would: cuBLAS's
# workspace on the first matrix product of each thread that runs one (the program's, and
# autograd's device thread), of the size torch chooses for that architecture; SDPA's backend is
# chosen as torch chooses it on that GPU, so flash attention keeps what it keeps for backward.
import json
import os
import sys
import weakref

import _memprof

_gpu = None
_trace_path = None
_is_user_file = None
_state = None
_THIS = __file__ if "__file__" in globals() else "<memprof simulate>"


class _State:
    """The recording: the events in order, the live storages, the allocated bytes."""

    def __init__(self):
        self.events = []
        self.next_id = 1
        # storage key -> [allocation id, tensors alive on it, bytes]
        self.live = {}
        self.allocated = 0
        self.peak = 0
        self.role = {}  # allocation id -> category named while it lived
        self.in_backward = set()  # allocation ids made by a backward pass
        self.freed_in_backward = set()
        self.freed_at_own_line = set()  # an op's or a line's intermediates
        self.in_module = set()  # allocated while an nn.Module was called
        self.site = {}  # allocation id -> its line
        self.born_in_pass = {}  # allocation id -> backward passes begun before it
        self.passes = 0
        self.was_backward = False
        self.notes = {}  # ("file:line", what was read there) -> None, in order
        self.workspaces = set()  # (thread, stream) handles that have cuBLAS's workspace


_MODULE_CALL = os.path.join("torch", "nn", "modules", "module.py")
_CALLS = ("_call_impl", "_wrapped_call_impl")


def _site():
    """The innermost line of the program's own code on the stack, as `file:line`, and whether
    an nn.Module is being called (a frame of its __call__)."""
    f = sys._getframe(2)
    in_module = False
    site = None
    while f is not None:
        code = f.f_code
        name = code.co_filename
        if site is None and name != _THIS and _is_user_file(name):
            site = f"{_label(name)}:{f.f_lineno}"
        if code.co_name in _CALLS and name.endswith(_MODULE_CALL):
            in_module = True
            break
        f = f.f_back
    if site is None and f is not None:
        # Inside a module call with no line of the program's yet: its caller's.
        f = f.f_back
        while f is not None and site is None:
            name = f.f_code.co_filename
            if name != _THIS and _is_user_file(name):
                site = f"{_label(name)}:{f.f_lineno}"
            f = f.f_back
    return site or "<unknown>", in_module


_labels = {}


def _label(path):
    """How a trace names a file: relative to the working directory when under it."""
    label = _labels.get(path)
    if label is None:
        try:
            rel = os.path.relpath(path)
            label = rel if not rel.startswith("..") else path
        except ValueError:
            label = path
        _labels[path] = label
    return label


def _block(nbytes):
    """The bytes the caching allocator counts as allocated for a request: rounded up to 512
    (what torch.cuda.memory_allocated() reads)."""
    return max(512, (int(nbytes) + 511) // 512 * 512)


def _allocate(nbytes, role=None):
    s = _state
    ident = s.next_id
    s.next_id += 1
    at, in_module = _site()
    s.events.append({"alloc": ident, "size": int(nbytes), "stream": _stream_now(), "at": at})
    s.allocated += _block(nbytes)
    if s.allocated > s.peak:
        s.peak = s.allocated
    s.site[ident] = at
    s.born_in_pass[ident] = _passes()
    if in_module:
        s.in_module.add(ident)
    if role is not None:
        s.role[ident] = role
    if _in_backward():
        s.in_backward.add(ident)
    return ident


def _free(key):
    s = _state
    entry = s.live.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] > 0:
        return
    del s.live[key]
    s.events.append({"free": entry[0]})
    s.allocated -= _block(entry[2])
    if _in_backward():
        s.freed_in_backward.add(entry[0])
    elif s.born_in_pass.pop(entry[0], -1) == _passes() and _site()[0] == s.site.get(entry[0]):
        # Its line's intermediate: freed there before another backward pass began (the same
        # line run again in the next step frees the last step's result, which was held).
        s.freed_at_own_line.add(entry[0])


_current_node = None


def _in_backward():
    """Whether a backward pass is running a node on this thread (what it allocates is
    autograd's)."""
    return _current_node is not None and _current_node() is not None


def _passes():
    """The backward passes begun so far (one begins where an event in a backward follows one
    outside)."""
    s = _state
    now = _in_backward()
    if now and not s.was_backward:
        s.passes += 1
    s.was_backward = now
    return s.passes


def _storage_key(t):
    try:
        return t.untyped_storage()._cdata
    except Exception:
        return None


def _track(t, role=None):
    """A fake CUDA tensor the program can hold: a new storage is an allocation."""
    key = _storage_key(t)
    if key is None:
        return
    entry = _state.live.get(key)
    if entry is None:
        nbytes = t.untyped_storage().nbytes()
        if nbytes == 0:
            return  # an empty tensor: nothing reaches the caching allocator
        entry = [_allocate(nbytes, role), 0, int(nbytes)]
        _state.live[key] = entry
    elif role is not None:
        _state.role.setdefault(entry[0], role)
    entry[1] += 1
    held = _held.get(id(t))
    if held is None:
        _held[id(t)] = (weakref.finalize(t, _release, id(t)), [key])
    else:
        held[1].append(key)


# id(tensor) -> (its finalizer, the storages it counts on): one finalizer per tensor, so that
# torch.utils.swap_tensors (module.to on a simulated model) can move them with the contents.
_held = {}


def _release(ident):
    held = _held.pop(ident, None)
    if held is not None:
        for key in held[1]:
            _free(key)


def _install_swaps(torch):
    """torch.utils.swap_tensors (module.to on a simulated model swaps each parameter in place)
    refuses a tensor with weakrefs, and simulated tensors have them (the finalizer that frees
    their storage, the fake mode's memo): a simulated parameter takes its new contents as
    `.data` instead, the same object holding the new storage, as a swap would leave it."""
    import torch.utils
    from torch._subclasses.fake_tensor import FakeTensor

    swap = torch.utils.swap_tensors

    def swap_or_take(t1, t2):
        if not (isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor)):
            return swap(t1, t2)
        with torch.no_grad():
            t1.data = t2
        held = _held.get(id(t1))
        if held is not None:
            old, held[1][:] = held[1][:], []
            for key in old:
                _free(key)
        _track(t1)

    torch.utils.swap_tensors = swap_or_take


def _name_role(t, role):
    """Names what a live tensor's storage is (parameters, gradients, optimizer state)."""
    key = _storage_key(t)
    entry = _state.live.get(key) if key is not None else None
    if entry is not None:
        _state.role[entry[0]] = role


# SDPA's backends, numbered as torch's SDPBackend (sdp_utils.h).
_SDPA_MATH, _SDPA_FLASH, _SDPA_EFFICIENT = 0, 1, 2


def _sdpa_choice(torch, args, kwargs):
    """The backend torch picks on this GPU for these inputs, in its default order (flash,
    memory-efficient, math): flash needs sm80+, fp16/bf16, a head dimension of at most 256 and a
    multiple of 8, and no explicit mask; memory-efficient needs sm50+ and a head dimension that is
    a multiple of 8 (4 for fp32)."""
    q, k, v = args[0], args[1], args[2]
    mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
    major = _gpu["major"]
    head = q.shape[-1]
    same = q.dtype == k.dtype == v.dtype
    if (major >= 8 and mask is None and same and q.dtype in (torch.float16, torch.bfloat16)
            and head <= 256 and head % 8 == 0 and v.shape[-1] == head):
        return _SDPA_FLASH
    if major >= 5 and same and head % (4 if q.dtype == torch.float32 else 8) == 0:
        return _SDPA_EFFICIENT
    return _SDPA_MATH


def _note(what):
    at, _ = _site()
    _state.notes.setdefault((at, what), None)


def install(gpu, trace_path, is_user_file):
    """Simulates `gpu` (a GPU model of memprof's table, as a dict) for the rest of the run."""
    global _gpu, _trace_path, _is_user_file, _state
    _gpu, _trace_path, _is_user_file = gpu, trace_path, is_user_file
    _state = _State()
    import torch
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

    def device(self):
        if inside[0]:
            return real_device.fget(self)
        return cuda0

    FakeTensor.device = property(device)
    FakeTensor.is_cuda = property(lambda self: not inside[0])
    FakeTensor.is_cpu = property(lambda self: bool(inside[0]))
    FakeTensor.get_device = lambda self: 0 if not inside[0] else -1
    FakeTensor.__repr__ = lambda self: (
        f"tensor(<simulated>, size={tuple(self.shape)}, dtype={self.dtype}, device='cuda:0')")

    def placeholder(t):
        """A simulated tensor's values, read on the CPU: zeros of its shape and dtype."""
        _note("values copied to the CPU: zeros were used")
        return torch.zeros(tuple(t.shape), dtype=t.dtype)

    def to_gpu(name, args, kwargs):
        """A CPU tensor's `.to("cuda")` or `.cuda()`: the copy dispatched as such (torch's own
        `.to` asks the driver for the current device first). None: not to the GPU."""
        t = args[0]
        if name == "cuda":
            dtype, non_blocking, memory_format = None, kwargs.get("non_blocking", False), None
        else:
            device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(
                *args[1:], **kwargs)
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
                out = _cross_entropy_as_cuda(torch, args, kwargs)
                if out is not None:
                    return out
            if args and isinstance(args[0], FakeTensor):
                if name in ("item", "__float__", "__int__", "__bool__", "__index__",
                            "__complex__") and args[0].numel() == 1:
                    # Read here, above libtorch, so that what it warns of (a scalar of a tensor
                    # that requires grad) is not said from memprof's frame.
                    _note("a value (.item(), bool(), a Python number): 0 was used")
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
                    target = kwargs.get("device")
                    for a in args[1:]:
                        if isinstance(a, (str, torch.device)):
                            target = a
                    dtype = kwargs.get("dtype") or next(
                        (a for a in args[1:] if isinstance(a, torch.dtype)), None)
                    if target is not None and not is_cuda(target):
                        out = placeholder(args[0])
                        return out if dtype is None else out.to(dtype)
                    if target is not None and dtype in (None, args[0].dtype) and \
                            not kwargs.get("copy") and not kwargs.get("memory_format"):
                        return args[0]  # on the GPU already: itself, as torch gives it
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
                return _sdpa_choice(torch, args, kwargs)
            if func is aten._local_scalar_dense.default:
                _note("a value (.item(), bool(), a Python number): 0 was used")
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
                _note("values copied to the CPU: zeros were used")
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
                    _track(t, role)
            if func in products:
                # After the product's output, as cuBLAS asks for them (measured on an H100).
                _cublas_workspace(torch)
                if func is aten.addmm.default and args[0].dim() == 1 and \
                        kwargs.get("beta", 1) == 1:
                    _cublaslt_workspace(torch)
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
            _track(t)
        logsumexp._memprof_saved_with = kept
        return out, logsumexp

    def value_dependent(func, args, kwargs):
        """An op whose output's size depends on its inputs' values (nonzero, a boolean mask,
        unique): run on the CPU with every element one (nonzero, true), the largest size such
        an op can give, and its output made a simulated tensor of that size."""
        _note(f"a size that depends on values ({func.__name__}): every element "
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

    _install_compile(torch)
    _install_grouping(torch)
    _install_module_moves(torch)
    _install_swaps(torch)
    _install_pinned_memory(torch)
    _install_device_queries(torch)
    _install_autocast(torch)
    _install_roles(torch)
    global _modes
    _modes = (SimulatedGpuFunctions(), SimulatedGpu())
    for m in _modes:
        m.__enter__()


class _Stream:
    """A simulated CUDA stream: numbered in order of creation (0: the default stream), the
    number the trace gives the allocations made while it is current."""

    count = 0

    def __init__(self, device=None, priority=0, **kwargs):
        _Stream.count += 1
        self.stream_id = _Stream.count
        self.device = _cuda_device
        self.priority = priority

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        return event if event is not None else _Event()

    def query(self):
        return True

    def synchronize(self):
        pass

    def is_capturing(self):
        return False  # no CUDA graph is captured

    @property
    def cuda_stream(self):
        return self.stream_id

    def __eq__(self, other):
        return isinstance(other, _Stream) and other.stream_id == self.stream_id

    def __hash__(self):
        return hash(("memprof-simulated-stream", self.stream_id))

    def __repr__(self):
        return f"<torch.cuda.Stream device=cuda:0 id={self.stream_id} (simulated)>"


class _DefaultStream(_Stream):
    def __init__(self):
        self.stream_id = 0
        self.device = _cuda_device
        self.priority = 0


class _Event:
    """A simulated CUDA event: always complete, no time between two."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        pass

    def record(self, stream=None):
        pass

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end_event):
        return 0.0


_cuda_device = None
_default_stream = None
_current_stream = []


def _stream_now():
    """The trace's number of the stream current now (0: the default one)."""
    return _current_stream[-1].stream_id if _current_stream else 0


def _streams_and_events(torch):
    global _cuda_device, _default_stream
    import contextlib

    _cuda_device = torch.device("cuda", 0)
    _default_stream = _DefaultStream()

    @contextlib.contextmanager
    def stream(s):
        if s is None:
            yield
            return
        _current_stream.append(s)
        try:
            yield
        finally:
            _current_stream.pop()

    def set_stream(s):
        _current_stream[:] = [s]

    def current_stream(device=None):
        return _current_stream[-1] if _current_stream else _default_stream

    return {
        "Stream": _Stream,
        "Event": _Event,
        "stream": stream,
        "set_stream": set_stream,
        "current_stream": current_stream,
        "default_stream": lambda device=None: _default_stream,
    }


def _random_state(torch):
    """CUDA's generator state, as programs save and restore it (checkpointing, resumable data
    order): a state of the size torch's Philox generator has (16 bytes), on the CPU."""
    state = {"value": torch.zeros(16, dtype=torch.uint8)}

    def get_rng_state(device="cuda"):
        return state["value"].clone()

    def set_rng_state(new_state, device="cuda"):
        state["value"] = new_state.clone()

    return {
        "get_rng_state": get_rng_state,
        "set_rng_state": set_rng_state,
        "get_rng_state_all": lambda: [get_rng_state()],
        "set_rng_state_all": lambda states: set_rng_state(states[0]),
        "initial_seed": lambda: 0,
    }


def _install_pinned_memory(torch):
    """Pinned host memory is the driver's (a DataLoader's pin_memory=True): the CPU tensor
    itself stands for it, and is never device memory."""
    torch.Tensor.pin_memory = lambda self, device=None: self


def _cublaslt_workspace(torch):
    """cuBLASLt's workspace: a matrix product with a bias (addmm, the Linear layers) runs
    through cuBLASLt, whose handle gets its own workspace from the caching allocator the first
    time (1 MiB, measured on an H100 and an H200 with torch 2.11), kept to the end."""
    handle = ("lt", "autograd" if _in_backward() else "program", _stream_now())
    if handle in _state.workspaces:
        return
    _state.workspaces.add(handle)
    size = _gpu["cublaslt_workspace"]
    if size > 0:
        _allocate(size, "workspaces")


def _install_grouping(torch):
    """foreach ops' grouping of tensors by device (clipping, optimizers) reads libtorch's device,
    the CPU for a simulated tensor: its groups are named cuda:0, as on the GPU, so that what is
    moved "to the group's device" stays on the simulated GPU."""
    group = torch._C._group_tensors_by_device_and_dtype
    cuda0 = torch.device("cuda", 0)
    from torch._subclasses.fake_tensor import FakeTensor

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


def _install_compile(torch):
    """torch.compile's graphs run eagerly on simulated tensors (dynamo does not trace under
    memprof's modes): what a compiled model allocates is its eager program's, and the report
    says so at the line that compiled it."""
    compile_ = torch.compile

    def noted(*args, **kwargs):
        _note("torch.compile: simulated as the eager program (inductor's buffers and their "
              "reuse are not modelled)")
        return compile_(*args, **kwargs)

    torch.compile = noted


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


def _install_autocast(torch):
    """`torch.autocast("cuda")` casts as CPU autocast does: the simulated tensors are the CPU's
    to libtorch. The two lists of ops agree on matrix products, convolutions, attention and
    losses (docs/fit.md says where they differ)."""
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


# The dtypes of the CUDA autocast regions open now (innermost last).
_cuda_autocast = []


def _cross_entropy_as_cuda(torch, args, kwargs):
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


_modes = ()


def _zero_scalar(torch, t):
    if t.dtype == torch.bool:
        return False
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return 0.0
    return 0


def _cublas_workspace(torch):
    """cuBLAS's workspace: torch gives each (thread, stream) handle one, through the caching
    allocator, on its first matrix product, and keeps it to the end. A backward runs on
    autograd's device thread on a GPU: a second one."""
    handle = ("autograd" if _in_backward() else "program", _stream_now())
    if handle in _state.workspaces:
        return
    _state.workspaces.add(handle)
    size = _gpu["cublas_workspace"]
    if size > 0:
        _allocate(size, "workspaces")


class _Properties:
    """What torch.cuda.get_device_properties answers for the simulated GPU."""

    def __init__(self, gpu):
        self.name = gpu["name"]
        self.total_memory = gpu["total_memory"]
        self.major = gpu["major"]
        self.minor = gpu["minor"]
        self.multi_processor_count = gpu["multi_processor_count"]
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.gcnArchName = ""
        self.L2_cache_size = gpu.get("l2_cache_size", 0)
        self.warp_size = 32
        self.max_threads_per_multi_processor = 2048
        self.regs_per_multiprocessor = 65536
        self.uuid = "00000000-0000-0000-0000-000000000000"

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count}) [simulated by memprof]")


def _install_device_queries(torch):
    """torch.cuda answers as one GPU of the named model: available, its properties, and the
    memory readings of the simulated allocations (allocated exact; reserved as allocated: the
    caching allocator's model runs on the trace afterwards)."""
    cuda = torch.cuda
    props = _Properties(_gpu)
    peaks = {"allocated": 0}

    def nothing(*args, **kwargs):
        return None

    def allocated(device=None):
        return _state.allocated

    def max_allocated(device=None):
        return max(_state.peak, peaks["allocated"]) if peaks["allocated"] else _state.peak

    def reset_peak(device=None):
        _state.peak = _state.allocated

    replacements = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "_lazy_init": nothing,
        "init": nothing,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": nothing,
        "synchronize": nothing,
        "empty_cache": nothing,
        # A cap is the replay's to apply (`memprof fit --memory`): nothing runs out here.
        "set_per_process_memory_fraction": nothing,
        "get_device_name": lambda device=None: props.name,
        "get_device_capability": lambda device=None: (props.major, props.minor),
        "get_device_properties": lambda device=None: props,
        "is_bf16_supported": lambda including_emulation=True: props.major >= 8,
        "manual_seed": nothing,
        "manual_seed_all": nothing,
        "seed": nothing,
        "seed_all": nothing,
        "memory_allocated": allocated,
        "max_memory_allocated": max_allocated,
        "memory_reserved": allocated,
        "max_memory_reserved": max_allocated,
        "reset_peak_memory_stats": reset_peak,
        "reset_max_memory_allocated": reset_peak,
        "mem_get_info": lambda device=None: (props.total_memory - _state.allocated,
                                             props.total_memory),
    }
    def memory_stats(device=None):
        """torch.cuda.memory_stats()'s keys, every one: the bytes allocated and live
        allocations as simulated; reserved and active bytes as allocated (the model replays the
        trace afterwards for the reserved bytes); what only a real allocator knows, 0."""
        now, peak = _state.allocated, max_allocated()
        live = len(_state.live)
        stats = {}
        for stat in ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
                     "reserved_bytes", "active_bytes", "inactive_split_bytes",
                     "requested_bytes"):
            for pool in ("all", "large_pool", "small_pool"):
                for kind in ("current", "peak", "allocated", "freed"):
                    stats[f"{stat}.{pool}.{kind}"] = 0
            if stat.endswith("bytes") and not stat.startswith("inactive"):
                stats[f"{stat}.all.current"] = now
                stats[f"{stat}.all.peak"] = peak
        stats["allocation.all.current"] = live
        stats["active.all.current"] = live
        for key in ("num_alloc_retries", "num_ooms", "num_sync_all_streams",
                    "num_device_alloc", "num_device_free", "max_split_size"):
            stats[key] = 0
        return stats

    replacements["memory_stats"] = memory_stats
    replacements.update(_streams_and_events(torch))
    replacements.update(_random_state(torch))
    replacements["is_current_stream_capturing"] = lambda: False  # no CUDA graph is captured
    _install_accelerator(torch)
    for name, value in replacements.items():
        setattr(cuda, name, value)
    try:
        import torch.cuda.graphs as graphs

        graphs.is_current_stream_capturing = replacements["is_current_stream_capturing"]
    except ImportError:
        pass
    try:
        import torch.cuda.memory as memory

        for name in ("memory_allocated", "max_memory_allocated", "memory_reserved",
                     "max_memory_reserved", "reset_peak_memory_stats", "empty_cache",
                     "mem_get_info", "memory_stats"):
            setattr(memory, name, replacements[name])
    except ImportError:
        pass


def _install_accelerator(torch):
    """torch.accelerator (torch 2.6+: DataLoader's pin-memory thread, device-generic code)
    answers as the simulated GPU."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None:
        return
    answers = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_accelerator": lambda check_available=False: torch.device("cuda"),
        "current_device_index": lambda: 0,
        "current_device_idx": lambda: 0,
        "set_device_index": lambda device: None,
        "set_device_idx": lambda device: None,
        "synchronize": lambda device=None: None,
        "current_stream": lambda device=None: torch.cuda.current_stream(),
    }
    for name, value in answers.items():
        if hasattr(accelerator, name):
            setattr(accelerator, name, value)


def _install_roles(torch):
    """Names parameters, gradients and optimizer state at each optimizer step; what a backward
    allocates is autograd's (the node it runs)."""
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    def before_step(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for p in group["params"]:
                _name_role(p, "parameters")
                if p.grad is not None:
                    _name_role(p.grad, "gradients")

    def after_step(optimizer, args, kwargs):
        for state in optimizer.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    _name_role(value, "optimizer state")

    register_optimizer_step_pre_hook(before_step)
    register_optimizer_step_post_hook(after_step)
    global _current_node
    _current_node = getattr(torch._C, "_current_autograd_node", None)


def _category(ident):
    """As memprof's peak names what it is made of (model/peak.rs's categories): what was named
    while it lived (parameters, gradients, optimizer state, workspaces), else by its life."""
    s = _state
    role = s.role.get(ident)
    if role is not None:
        return role
    if ident in s.in_backward:
        return "autograd temporaries"
    if ident in s.freed_in_backward:
        return "activations"
    if ident in s.freed_at_own_line:
        return "temporaries"
    return "activations" if ident in s.in_module else "inputs"


def finish(torch_version):
    """Writes the trace; returns what the report says of the simulation."""
    s = _state
    if s is None:
        return None
    for e in s.events:
        if "alloc" in e:
            e["category"] = _category(e["alloc"])
    trace = {
        "memprof_trace": 1,
        "torch_version": torch_version,
        "device": {
            "name": _gpu["name"] + " (simulated)",
            "total_memory": _gpu["total_memory"] - _gpu["outside_allocator"],
            "device_memory": _gpu["total_memory"],
        },
        "sizes": "requested",
        "simulated": {
            "gpu": _gpu["name"],
            "notes": [{"at": at, "what": what} for at, what in s.notes],
        },
        "events": s.events,
    }
    with open(_trace_path, "w") as f:
        json.dump(trace, f)
    return {"notes": len(s.notes)}
