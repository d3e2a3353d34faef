# memprof's peak attribution, the Python half, run inside the profiled interpreter: which files
# are torch's, the standard library's and the user's (the rules the native site finder applies
# to each code object once), the callable that stands in for torch's backward entry point (so
# that autograd's threads allocate at the line that ran the backward), a global optimizer
# step hook that names parameters and optimizer state (each optimizer's first steps only), the
# line maps of compiled graphs (compiled.py), and, at the end, which live storages are
# parameters, buffers, gradients and optimizer state.
import importlib.machinery
import os
import sys
import sysconfig

import _memprof

_ENTRY = "_engine_run_backward"
_patched = []
# Steps of each optimizer whose tensors are named: its state exists from its first step, and
# what it names stays the same blocks after that.
_NAMED_STEPS = 2
_steps = {}
_step_hook = None


def _package_dir(name):
    # PathFinder itself, not importlib.util.find_spec: the lookup must not reach memprof's
    # import hooks (sys.meta_path), nor import the package.
    try:
        spec = importlib.machinery.PathFinder.find_spec(name)
    except Exception:
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(spec.origin)


def _spellings(path):
    """A folder as code objects may name it: as given, absolute and with links resolved."""
    out = set()
    for p in (path, os.path.abspath(path), os.path.realpath(path)):
        out.add(p.rstrip(os.sep) + os.sep)
    return sorted(out)


def install(script_path):
    tools = []
    # memprof's own package (the in-process front end's frames: the magics, the plugin), which
    # whole stacks (--history) leave out too.
    hidden = []
    for name in ("torch", "triton", "memprof"):
        d = _package_dir(name)
        if d:
            tools += _spellings(d)
            if name == "memprof":
                hidden += _spellings(d)
    # The files of the wheel's command that runs the script (pip's console script,
    # torch_memprof.py, runpy under `python -m memprof`): their frames lead to the script's and
    # are no context of the program's own (memprof/_launcher.py notes them); whole stacks end
    # before them.
    command = []
    launcher = sys.modules.get("memprof._launcher")
    for f in getattr(launcher, "COMMAND_FILES", ()):
        command += [p.rstrip(os.sep) for p in _spellings(f)]
    tools += command
    library = []
    for key in ("stdlib", "platstdlib"):
        d = sysconfig.get_paths().get(key)
        if d:
            library += _spellings(d)
    import _memprof_imports

    # With no --device the run follows the program to the device it sets (a rank's own GPU),
    # whether before or after CUDA started; Rust decides whether to (never with --device).
    _memprof_imports.after_import("torch.cuda", _follow_set_device)
    if _memprof.allocation_trace_on():

        _memprof_imports.after_import("torch.cuda", _trace_cuda_requests)
    if script_path:
        user_dirs = [os.path.dirname(script_path)]
    else:
        # In-process: the working directory (a notebook's), and the folder of the script that
        # runs the session (`python train.py` calling memprof.profile).
        user_dirs = [os.getcwd()]
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if main_file:
            user_dirs.append(os.path.dirname(os.path.abspath(main_file)))
    # Inductor's generated files, wherever its cache is (they are also named to the site
    # finder one by one as they load: compiled.py).
    generated = [os.sep + "torchinductor_"]
    cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache_dir:
        generated += _spellings(cache_dir)
    user = [s for d in user_dirs for s in _spellings(d)]
    readable = _memprof.sites_start(tools, generated, library, user, hidden, command)
    if not readable:
        _memprof.warn(
            "memprof cannot read this Python's frames natively: the peak's sites are unknown "
            f"(Python {sys.version.split()[0]}; supported: 3.11, 3.12, 3.13, 3.14)"
        )
        return
    import _memprof_imports

    _memprof_imports.after_import("torch.autograd", _patch_backward)
    _memprof_imports.after_import("torch.optim.optimizer", _hook_optimizers)
    _memprof_imports.after_import("torch.cuda.graphs", _watch_cuda_graphs)
    _memprof_imports.after_import("torch._inductor.cudagraph_trees", _watch_graph_tree_warmups)
    import _memprof_compiled

    _memprof_compiled.install()


def _watch_cuda_graphs(graphs):
    """A CUDA graph's capture (`torch.cuda.graph`, which torch's CUDA-graph trees record with):
    what it allocated and still holds when it ends is its private pool's (cuda_graph_pool); each
    replay is counted (it allocates nothing). Only memprof's bookkeeping runs around them: no
    CUDA call, no allocation, so the captured graph is the same."""
    context = getattr(graphs, "graph", None)
    if context is not None and "__enter__" in context.__dict__ and "__exit__" in context.__dict__:
        enter, leave = context.__enter__, context.__exit__

        def __enter__(self):
            self._memprof_since = _memprof.allocation_serial()
            _memprof.graph_pool_window(True)
            return enter(self)

        def __exit__(self, *exc):
            try:
                return leave(self, *exc)
            finally:
                _memprof.graph_pool_window(False)
                _memprof.mark_graph_pool(getattr(self, "_memprof_since", 2**63))

        _patch(context, "__enter__", __enter__)
        _patch(context, "__exit__", __exit__)
    cuda_graph = getattr(graphs, "CUDAGraph", None)
    replay = cuda_graph.__dict__.get("replay") if cuda_graph is not None else None
    if callable(replay):

        def replayed(self, *args, **kwargs):
            _memprof.note_graph_replay()
            return replay(self, *args, **kwargs)

        _patch(cuda_graph, "replay", replayed)


def _watch_graph_tree_warmups(trees):
    """torch's CUDA-graph trees (mode="reduce-overhead") warm a graph up in its pool before
    recording it: what the warm-up allocated and still holds is the pool's."""
    manager = getattr(trees, "_use_cuda_memory_pool_manager", None)
    if manager is None:
        return
    import contextlib

    @contextlib.contextmanager
    def in_pool(*args, **kwargs):
        since = _memprof.allocation_serial()
        _memprof.graph_pool_window(True)
        try:
            with manager(*args, **kwargs):
                yield
        finally:
            _memprof.graph_pool_window(False)
            _memprof.mark_graph_pool(since)

    _patch(trees, "_use_cuda_memory_pool_manager", in_pool)


def _patch(owner, name, value):
    _patched.append((owner, name, owner.__dict__[name] if name in owner.__dict__ else getattr(owner, name)))
    setattr(owner, name, value)


def _follow_set_device(cuda):
    """torch.cuda.set_device and torch.accelerator.set_device_index end in these C functions:
    after each, memprof follows the device set (the program sees the original's result)."""
    C = sys.modules["torch"]._C
    for name in ("_cuda_setDevice", "_accelerator_setDeviceIndex"):
        original = getattr(C, name, None)
        if original is None:
            continue

        def follow(*args, _original=original, **kwargs):
            result = _original(*args, **kwargs)
            _memprof.device_set()
            return result

        follow.__wrapped__ = original
        _patch(C, name, follow)


def _trace_cuda_requests(cuda):
    # --trace: the CUDA allocator's own trace entries (each allocation's requested size and
    # stream) need its tracker attached once it exists: torch runs its lazy-init queue right
    # after initialising CUDA (or the call runs now, if the program already has).
    cuda._lazy_call(_memprof.cuda_trace_attach)


def _hook_optimizers(optimizer_module):
    global _step_hook
    register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if register is not None:
        _step_hook = register(_after_step)


def _after_step(optimizer, args, kwargs):
    """After an optimizer's step: a mark on the timeline, and (the first steps) its parameters
    and state, as the peak's categories."""
    try:
        _memprof.optimizer_stepped()
        n = _steps.get(id(optimizer), 0)
        if n >= _NAMED_STEPS:
            return
        _steps[id(optimizer)] = n + 1
        torch = sys.modules["torch"]
        Tensor = torch.Tensor
        roles = []

        def add(t, role):
            local = getattr(t, "_local_tensor", None)  # a DTensor's shard
            t = local if local is not None else t
            # A fake tensor (`--simulate-gpu`, FakeTensorMode) has no memory to name.
            if issubclass(type(t), Tensor) and not t.is_meta and \
                    type(t).__name__ != "FakeTensor":
                roles.append((t.untyped_storage().data_ptr(), role))

        for group in optimizer.param_groups:
            for p in group["params"]:
                add(p, 1)
                for v in optimizer.state.get(p, {}).values():
                    if issubclass(type(v), Tensor):
                        add(v, 3)
        _memprof.mark_roles(roles)
    except Exception:
        pass  # the categories are a nicety; the program's step must not notice


def _patch_backward(autograd):
    graph = sys.modules.get("torch.autograd.graph")
    for module in (autograd, graph):
        original = getattr(module, _ENTRY, None) if module is not None else None
        if original is not None and not isinstance(original, _memprof.BackwardEntry):
            setattr(module, _ENTRY, _memprof.BackwardEntry(original))
            _patched.append((module, _ENTRY, original))


def stop():
    """Puts torch's own backward entry point and inductor's loader back, and removes the
    optimizer hook."""
    global _step_hook
    import _memprof_compiled

    _memprof_compiled.stop()
    if _step_hook is not None:
        _step_hook.remove()
        _step_hook = None
    while _patched:
        owner, name, original = _patched.pop()
        setattr(owner, name, original)


def roles(device_type, device_index):
    """[(storage data_ptr, category)] of the storages on the profiled device that tensors in
    memory now hold: parameters, buffers, gradients and optimizer state as the models and
    optimizers name them, "other" for the rest; and the blocks that CUDA graphs' private pools
    hold (cuda_graph_pool)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    import _memprof_inventory

    named = _memprof_inventory.roles(torch, device_type, device_index)
    if device_type == "cuda":
        known = {ptr for ptr, category in named if category != "other"}
        pool = set(_graph_pool_blocks(torch, device_index)) - known
        named = [(p, c) for p, c in named if p not in pool] + [(p, "cuda_graph_pool") for p in pool]
    return named


def _graph_pool_blocks(torch, device_index):
    """Addresses of the allocated blocks in CUDA graphs' private pools now (torch.cuda.graph,
    cudagraph trees under mode="reduce-overhead"): the allocator's own snapshot, read once at the
    end (it allocates nothing)."""
    try:
        if not torch.cuda.is_initialized():
            return []
        enabled = getattr(torch._C, "_cuda_isHistoryEnabled", None)
        if enabled is not None and enabled():
            # The snapshot would copy the whole recorded history (millions of events): the
            # pool's blocks stay "other" then.
            return []
        snapshot = torch.cuda.memory._snapshot(device_index)
    except Exception:
        return []
    out = []
    for segment in snapshot.get("segments", ()):
        if segment.get("device", device_index) != device_index:
            continue
        if tuple(segment.get("segment_pool_id", (0, 0))) == (0, 0):
            continue
        out += [b["address"] for b in segment.get("blocks", ()) if b.get("state") == "active_allocated"]
    return out
