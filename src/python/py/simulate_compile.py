# `--simulate-gpu` and torch.compile: a compiled model runs the code inductor generates for the
# simulated GPU, whose buffers are the allocations, as on it.
#
# Dynamo and AOTAutograd trace the program's simulated tensors as the CPU's (what they are to
# libtorch: autograd's joint trace needs no CUDA device thread), with SDPA's backend chosen as
# on the GPU. Each graph AOTAutograd hands to inductor (the forward and the backward, after its
# partitioner chose what the forward saves) is given fake CUDA inputs and values, and inductor
# compiles it for CUDA: its fusions, the buffers its wrapper allocates, frees and reuses, and
# the kernels it leaves to libtorch (matrix products, attention) are the GPU's. No kernel is
# compiled or launched: triton's kernels are placeholders that do nothing, triton's driver
# answers as the GPU, and the wrapper's buffers are simulated tensors. What cannot be compiled
# so (a mode or backend this does not model, a compile error) runs as its eager program, and the
# ledger says so at the line that compiled it.
import contextlib
import re

import _memprof_simulate_ledger as ledger

# The backends whose graphs run on the simulated tensors as they are (dynamo's and AOTAutograd's
# tracing, then torch's own ops).
_EAGER_BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition")


def install(torch, gpu, sdpa_choice):
    """From now on `torch.compile` with inductor compiles for the simulated `gpu`;
    `sdpa_choice(args, kwargs)` is the SDPA backend that GPU picks. Inductor is set up at the
    first compile (importing it takes seconds)."""
    compile_ = torch.compile
    backend = []  # [the backend] or [None, why not], once set up

    def simulated_inductor():
        if not backend:
            try:
                backend.append(_Backend(torch, gpu, sdpa_choice))
            except Exception as e:  # inductor or triton missing, or too different
                backend.extend([None, f"{type(e).__name__}: {e}"])
        return backend

    def compiled(model=None, *args, **kwargs):
        name = kwargs.get("backend", "inductor")
        if name in _EAGER_BACKENDS:
            return compile_(model, *args, **kwargs)
        inductor = simulated_inductor() if name == "inductor" else [None, None]
        if inductor[0] is None:
            why = (f"inductor could not be set up: {inductor[1]}" if name == "inductor"
                   else f"backend {getattr(name, '__name__', name)!r} is not modelled")
            ledger.note(f"torch.compile: simulated as the eager program ({why})")
            kwargs["backend"] = "eager"
            kwargs.pop("mode", None)
            kwargs.pop("options", None)
            return compile_(model, *args, **kwargs)
        mode = kwargs.pop("mode", None)
        options = kwargs.pop("options", None)
        kwargs["backend"] = inductor[0]
        what = "torch.compile: inductor's code for the simulated GPU (its buffers; no kernel runs)"
        if mode in ("reduce-overhead", "max-autotune"):
            what += f"; mode {mode!r}: its CUDA graphs are not simulated"
        if mode in ("max-autotune", "max-autotune-no-cudagraphs") or options:
            what += ("; inductor's default kernel choices (max-autotune's benchmarks of "
                     "other kernels need the GPU)")
        ledger.note(what)
        return compile_(model, *args, **kwargs)

    torch.compile = compiled


class _Backend:
    """torch.compile's backend under the simulation: inductor, for the simulated GPU."""

    def __init__(self, torch, gpu, sdpa_choice):
        from torch._inductor import compile_fx
        from torch._subclasses.fake_tensor import FakeTensorMode

        self.torch = torch
        self.sdpa_choice = sdpa_choice

        class GpuFakeMode(FakeTensorMode):
            # Its tensors are CUDA's: the mode must never touch a device (torch 2.11 makes a
            # CUDA context for the first one otherwise).
            @property
            def avoid_device_init(self):
                return True

        self.fake_mode = GpuFakeMode
        self.gpu_available = torch.cuda.is_available  # the simulation's answer
        self.compile_fx = compile_fx
        _install_kernel_placeholders(torch, gpu)
        self.__name__ = "inductor"

    def __call__(self, gm, example_inputs, **kwargs):
        original = [(n, n.target, n.args, n.kwargs) for n in gm.graph.nodes]
        try:
            self._for_the_tracer(gm)
            example_inputs = self._as_traced(example_inputs)
            with self._gpu_answers(False):
                return self.compile_fx.compile_fx(
                    gm, example_inputs, inner_compile=self._inner_for_gpu,
                    config_patches={"fx_graph_cache": False, "autotune_local_cache": False,
                                    "autotune_remote_cache": False, "compile_threads": 1,
                                    "triton.cudagraphs": False})
        except Exception as e:
            # The program runs on: this graph as dynamo captured it, run eagerly on the
            # simulated tensors, and the report says so.
            for node, target, args, kw in original:
                node.target, node.args, node.kwargs = target, args, kw
            gm.recompile()
            ledger.note("torch.compile: a graph inductor could not compile for the simulated "
                        f"GPU ran as its eager program ({type(e).__name__}: {e})"[:300])
            return gm.forward

    @contextlib.contextmanager
    def _gpu_answers(self, available):
        """While AOTAutograd traces on the CPU's tensors, torch.cuda says there is no GPU (torch
        2.9's pattern passes make their example tensors on it otherwise); while inductor
        compiles for the GPU, that there is."""
        cuda = self.torch.cuda
        before = cuda.is_available
        cuda.is_available = self.gpu_available if available else (lambda: False)
        try:
            yield
        finally:
            cuda.is_available = before

    # --- the dynamo graph, traced as the CPU's ---------------------------------------------

    def _for_the_tracer(self, gm):
        """The graph as AOTAutograd must trace it on the simulated tensors, the CPU's to
        libtorch: what it makes on the GPU it makes on the CPU (a `.cuda()` is a `.cpu()`,
        itself), and F.scaled_dot_product_attention calls the backend the GPU would choose (on
        the CPU's tensors libtorch takes its CPU kernel, or decomposes it)."""
        torch = self.torch
        sdpa = {torch._C._nn.scaled_dot_product_attention,
                torch.nn.functional.scaled_dot_product_attention}
        on_gpu = self._sdpa_on_gpu()
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target in sdpa:
                node.target = on_gpu
            if node.op == "call_method" and node.target == "cuda":
                node.target = "cpu"
        _retarget_nodes(gm, torch, "cpu")

    def _as_traced(self, example_inputs):
        """The inputs as dynamo traced them: torch 2.9's dynamo hands the backend the program's
        tensors, whose fake mode (the simulation's) is not the tracer's."""
        from torch._guards import TracingContext
        from torch._subclasses.fake_tensor import FakeTensor

        context = TracingContext.try_get()
        mode = context.fake_mode if context is not None else None
        if mode is None:
            return example_inputs
        return [mode.from_tensor(t) if isinstance(t, FakeTensor) and t.fake_mode is not mode
                else t for t in example_inputs]

    def _sdpa_on_gpu(self):
        torch, choose, aten = self.torch, self.sdpa_choice, self.torch.ops.aten

        def sdpa_on_gpu(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                        scale=None, enable_gqa=False):
            args = (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
            if enable_gqa and query.shape[-3] != key.shape[-3]:
                return torch._C._nn.scaled_dot_product_attention(*args)
            backend = choose(args, {})
            if backend == 1:
                return aten._scaled_dot_product_flash_attention(
                    query, key, value, dropout_p, is_causal, False, scale=scale)[0]
            if backend == 2:
                grad = torch.is_grad_enabled() and any(
                    t.requires_grad for t in (query, key, value))
                return aten._scaled_dot_product_efficient_attention(
                    query, key, value, attn_mask, grad, dropout_p, is_causal, scale=scale)[0]
            return aten._scaled_dot_product_attention_math(
                query, key, value, attn_mask, dropout_p, is_causal, scale=scale)[0]

        return sdpa_on_gpu

    # --- AOTAutograd's graphs, compiled for the GPU ----------------------------------------

    def _inner_for_gpu(self, gm, example_inputs, **kwargs):
        """Inductor's inner compile of one graph (forward, backward or inference) for the GPU:
        its inputs, the values its nodes were traced to and the devices it names made the
        GPU's fake tensors, at the same sizes and strides. (Not traced again: a backward's
        inputs come with the strides inductor gave the forward's outputs, channels-last
        convolutions' among them, which its views were not traced for; inductor lowers them as
        on the GPU.)"""
        torch = self.torch
        from torch._guards import TracingContext
        from torch.utils._pytree import tree_map

        context = TracingContext.try_get()
        saved = context.fake_mode if context is not None else None
        # Dynamic shapes' symbols are the tracer's: the same shape environment.
        mode = self.fake_mode(allow_non_fake_inputs=True,
                              shape_env=getattr(saved, "shape_env", None))
        cuda = torch.device("cuda", 0)

        def on_gpu(t):
            if not isinstance(t, torch.Tensor) or t.device.type not in ("cpu", "cuda"):
                return t
            with mode:
                return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                                           device=cuda, requires_grad=t.requires_grad)

        inputs = [on_gpu(t) for t in example_inputs]
        for node in gm.graph.nodes:
            if "val" in node.meta:
                node.meta["val"] = tree_map(on_gpu, node.meta["val"])
        _retarget_nodes(gm, torch, cuda)
        if context is not None:
            context.fake_mode = mode
        try:
            with mode, self._gpu_answers(True):
                return self.compile_fx.compile_fx_inner(gm, inputs, **kwargs)
        finally:
            if context is not None:
                context.fake_mode = saved


def _retarget_nodes(gm, torch, device):
    """Each CPU or CUDA device the graph's calls name made `device`."""
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method"):
            node.args = _retarget(node.args, torch, device)
            node.kwargs = _retarget(node.kwargs, torch, device)
    gm.recompile()


def _retarget(value, torch, device):
    """`value` (a node's arguments) with each CPU or CUDA device in it made `device`."""
    if isinstance(value, torch.device):
        return torch.device(device) if value.type in ("cpu", "cuda") else value
    if isinstance(value, str) and value in ("cpu", "cuda", "cuda:0"):
        return torch.device(device)
    if isinstance(value, tuple):
        return tuple(_retarget(v, torch, device) for v in value)
    if isinstance(value, list):
        return [_retarget(v, torch, device) for v in value]
    if isinstance(value, dict):
        return {k: _retarget(v, torch, device) for k, v in value.items()}
    return value


class _Kernel:
    """A triton kernel inductor generated: launched, it does nothing (a simulated tensor has
    no values). At its first launch, a kernel with several configurations to choose from is
    tuned on the GPU: each configuration runs on clones of the buffers the kernel writes, taken
    only where they fit under the peak so far (CachingAutotuner.bench: a clone that would raise
    the peak is copied to the host instead), and given back after each run; here they are taken
    once and given back."""

    def __init__(self, torch, name, tuner):
        self.__name__ = name
        self.torch = torch
        self.tuner = tuner  # inductor's CachingAutotuner for it (not compiled), or None

    def run(self, *args, **kwargs):
        tuner, self.tuner = self.tuner, None
        if tuner is not None and len(getattr(tuner, "configs", ())) > 1 and \
                getattr(tuner, "optimize_mem", True):
            try:
                self._clones_while_tuned(tuner, args, kwargs)
            except Exception:
                pass  # a release's tuner unlike this one: no clones, the program goes on
        return None

    def _clones_while_tuned(self, tuner, args, kwargs):
        """The tuner's own clones (`maybe_clone_args`), leaving out, as its
        `copy_args_to_cpu_if_needed` does, each written buffer that would raise the peak."""
        from torch._prims_common import compute_required_storage_length

        written = set(tuner.mutated_arg_names)
        budget = ledger.peak() - ledger.allocated()
        to_host = set()
        for name, arg in list(zip(tuner.fn.arg_names, args)) + list(kwargs.items()):
            if name in written and isinstance(arg, self.torch.Tensor):
                size = compute_required_storage_length(arg.shape, arg.stride(), 0) * \
                    arg.element_size()
                if size > budget:
                    to_host.add(name)
                else:
                    budget -= size
        clones = tuner.maybe_clone_args(to_host, *args, **kwargs)
        del clones

    def __call__(self, *args, **kwargs):
        return None

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _install_kernel_placeholders(torch, gpu):
    """Inductor's generated code runs without a GPU: its triton kernels are placeholders, its
    buffers simulated tensors, its device guards and streams the simulated GPU's."""
    import torch._inductor.async_compile as async_compile
    from torch._C._dynamo import guards
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    def triton(self, name, source, *args, **kwargs):
        # A kernel that writes buffers it reads (the only ones its tuning clones) has its
        # module loaded as inductor loads it (its configurations, nothing compiled); the
        # placeholder alone for the others, or if that fails.
        tuner = None
        if re.search(r"'mutated_arg_names': \[[^\]]", source):
            try:
                from torch._inductor.codecache import PyCodeCache

                tuner = getattr(PyCodeCache.load(source), name, None)
            except Exception:
                tuner = None
        return _Kernel(torch, name, tuner)

    async_compile.AsyncCompile.triton = triton
    cuda = torch.device("cuda", 0)

    def empty_strided_cuda(size, stride, dtype):
        return torch.empty_strided(size, stride, dtype=dtype, device=cuda)

    def reinterpret_tensor(base, size, stride, offset):
        return torch.as_strided(base, size, stride, base.storage_offset() + offset)

    guards._empty_strided_cuda = empty_strided_cuda
    guards._reinterpret_tensor = reinterpret_tensor
    if hasattr(guards, "copy_if_misaligned"):
        # A simulated tensor's storage is a caching allocator block: never misaligned (and
        # its address is not a fake tensor's to read).
        guards.copy_if_misaligned = lambda t: t
    torch._C._cuda_getCurrentRawStream = lambda device=0: 0
    torch.cuda._exchange_device = lambda device: 0
    torch.cuda._maybe_exchange_device = lambda device: 0
    capability = gpu["major"] * 10 + gpu["minor"]
    properties = {"max_shared_mem": gpu.get("shared_memory_per_block_optin", 232448),
                  "multiprocessor_count": gpu["multi_processor_count"], "max_num_regs": 65536,
                  "warpSize": 32, "sm_clock_rate": 0, "mem_clock_rate": 0, "mem_bus_width": 0}

    class Utils:
        def get_device_properties(self, device):
            return dict(properties)

    class Driver:
        backend = "cuda"
        utils = Utils()

        def is_active(self):
            return True

        def get_current_target(self):
            return GPUTarget("cuda", capability, 32)

        def get_current_device(self):
            return 0

        def set_current_device(self, device):
            return None

        def get_current_stream(self, device=None):
            return 0

        def get_device_interface(self):
            return torch.cuda

        def get_active_torch_device(self):
            return cuda

    driver.set_active(Driver())
    try:
        # A kernel's module makes the GPU's real driver active when it loads: this one stays.
        from torch._inductor.runtime import triton_helpers

        triton_helpers.set_driver_to_gpu = lambda: None
    except ImportError:
        pass
    _answer_as_the_gpu(torch)
    _no_context_for_fake_tensors(torch)


def _no_context_for_fake_tensors(torch):
    """torch 2.11's fake tensors make a CUDA context for the first fake CUDA tensor (a real
    one-element tensor), once per device: answered as done, there is no driver to ask."""
    from torch._subclasses import fake_tensor

    init = getattr(fake_tensor, "init_gpu_context", None)
    if init is None or not hasattr(init, "cache_clear"):
        return
    available = torch.cuda.is_available
    torch.cuda.is_available = lambda: False
    try:
        for device in (torch.device("cuda", 0), torch.device("cuda")):  # cached: not asked again
            init(device)
    finally:
        torch.cuda.is_available = available


def _answer_as_the_gpu(torch):
    """Dynamo's and inductor's view of the CUDA device (`CudaInterface`) took torch.cuda's
    functions before the simulation answered for them: it asks the simulated GPU."""
    from torch._dynamo import device_interface

    interface = device_interface.CudaInterface
    for name, answer in (
            ("current_device", torch.cuda.current_device),
            ("set_device", torch.cuda.set_device),
            ("device_count", torch.cuda.device_count),
            ("synchronize", torch.cuda.synchronize),
            ("get_device_properties", torch.cuda.get_device_properties),
            ("get_raw_stream", lambda device=0: 0),
            ("exchange_device", torch.cuda._exchange_device),
            ("maybe_exchange_device", torch.cuda._maybe_exchange_device),
            ("memory_allocated", torch.cuda.memory_allocated),
            ("is_bf16_supported", torch.cuda.is_bf16_supported)):
        if hasattr(interface, name):
            setattr(interface, name, staticmethod(answer))
    worker = getattr(interface, "Worker", None)
    if worker is not None and hasattr(worker, "get_device_properties"):
        worker.get_device_properties = staticmethod(
            lambda device=None: torch.cuda.get_device_properties(device))
