# `--simulate-gpu`'s torch.distributed: with `--simulate-ranks N` the program runs as rank 0 of N
# (the environment torchrun gives a rank, a process group of torch's own fake backend: every
# collective completes at once and moves no bytes), so that what one rank allocates on the GPU
# under FSDP2 (fully_shard), DDP or DTensor is simulated as on one GPU of N. Collectives' outputs
# are allocated by the program or by torch around them, as on the GPU; NCCL's own buffers are
# outside the caching allocator (the device line's). Without --simulate-ranks an NCCL process
# group stops the program with an error that says how to simulate it.
import os

import _memprof_simulate_device as gpu_device
import _memprof_simulate_ledger as ledger

# torchrun's default rendezvous port; the ranks are placed 8 to a node (N when fewer).
_MASTER_PORT = "29500"
_RANKS_PER_NODE = 8


def install(torch, ranks):
    import torch.distributed as dist

    if not dist.is_available():
        return
    if ranks:
        _environment(ranks)
    _install_process_group(torch, dist, ranks)
    if ranks:
        _install_collectives_on_fake_tensors()
        _install_futures(torch, dist)
        _install_fsdp(torch)
        _install_ddp(torch, dist)


def tensor_subclasses(torch):
    """The tensor subclasses of torch.distributed that wrap a rank's simulated tensors."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return []
    return [DTensor]


def _environment(ranks):
    """What torchrun (torch.distributed.run) sets for a rank: rank 0 of the first node."""
    local = min(ranks, _RANKS_PER_NODE)
    os.environ.update({
        "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0", "ROLE_RANK": "0",
        "WORLD_SIZE": str(ranks), "LOCAL_WORLD_SIZE": str(local), "ROLE_WORLD_SIZE": str(ranks),
        "MASTER_ADDR": os.environ.get("MASTER_ADDR", "127.0.0.1"),
        "MASTER_PORT": os.environ.get("MASTER_PORT", _MASTER_PORT),
    })


def _install_process_group(torch, dist, ranks):
    """init_process_group: with ranks, torch's fake backend as rank 0 of them whatever backend
    the program names (NCCL needs the GPU; gloo would wait for the other ranks); without, an NCCL
    group is refused with an error that names --simulate-ranks (NCCL's own initialisation would
    abort the process, report and all), and gloo on one rank runs."""
    init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        if ranks:
            from torch.testing._internal.distributed.fake_pg import FakeStore

            for name in ("init_method", "store", "rank", "world_size", "device_id"):
                kwargs.pop(name, None)
            return init("fake", store=FakeStore(), rank=0, world_size=ranks, **kwargs)
        if backend is None or "nccl" in str(backend).lower():
            ledger.note("torch.distributed: an NCCL process group is not simulated without "
                        "--simulate-ranks; the prediction covers what ran before this line")
            raise RuntimeError(
                "memprof --simulate-gpu: an NCCL process group needs --simulate-ranks N (the "
                "program then runs as rank 0 of N, its collectives simulated); the prediction "
                "covers what ran before this line (docs/fit.md, Without a GPU)")
        return init(backend, *args, **kwargs)

    dist.init_process_group = init_process_group


def _install_collectives_on_fake_tensors():
    """torch's meta kernels of the c10d collectives (each completes with a fake work), which
    fake tensors run: torch.distributed registers them itself from torch 2.10 or so; before,
    its memory tools' module does."""
    import importlib

    for name in ("torch.distributed._meta_registrations",
                 "torch.distributed._tools.fake_collectives"):
        try:
            importlib.import_module(name)
            return
        except ImportError:
            continue


def _install_futures(torch, dist):
    """The fake backend's works complete with no value; an asynchronous collective's future
    gives its tensors back, as NCCL's does, so that what is chained on it (DDP's communication
    hooks: `dist.all_reduce(t, async_op=True).get_future().then(...)`) runs."""
    import functools

    class Done:
        """A completed collective: its future holds the tensors it wrote."""

        def __init__(self, work, tensors):
            self._work = work
            self._tensors = tensors

        def wait(self, timeout=None):
            return True

        def is_completed(self):
            return True

        def is_success(self):
            return True

        def get_future(self):
            future = torch.futures.Future()
            future.set_result(self._tensors)
            return future

        def __getattr__(self, name):
            return getattr(self._work, name)

    def returned(name, written):
        collective = getattr(dist, name, None)
        if collective is None:
            return

        @functools.wraps(collective)
        def run(*args, **kwargs):
            work = collective(*args, **kwargs)
            if work is None or not kwargs.get("async_op", False):
                return work
            out = written(*args, **kwargs)
            return Done(work, list(out) if isinstance(out, (list, tuple)) else [out])

        setattr(dist, name, run)

    first = lambda tensor, *a, **k: k.get("tensor", tensor)  # noqa: E731
    output = lambda out, *a, **k: k.get("output_tensor", k.get("output", out))  # noqa: E731
    returned("all_reduce", first)
    returned("broadcast", first)
    returned("reduce", first)
    returned("all_gather", lambda tensors, *a, **k: k.get("tensor_list", tensors))
    returned("all_gather_into_tensor", output)
    returned("reduce_scatter", output)
    returned("reduce_scatter_tensor", output)
    returned("all_to_all_single", output)


def _install_fsdp(torch):
    """FSDP2's fully_shard (and FSDP1 with a device_id) on a model still on the CPU moves its
    parameters and buffers to the GPU first, as FSDP does (it gives each CPU tensor's `.data`
    the moved tensor; a CPU parameter cannot take a simulated tensor in place, so the simulation
    puts a simulated parameter in its place on its modules, before FSDP looks at them)."""
    import functools
    import importlib

    try:
        from torch.distributed.fsdp._fully_shard import _fully_shard as fully_shard_module
    except ImportError:
        return

    original = fully_shard_module.fully_shard

    def to_gpu(modules):
        """Each parameter and buffer still on the CPU, moved: the same tensor (tied weights) to
        the same simulated one, what is already the GPU's (a sharded block) left as it is."""
        moved = {}
        for m in (sub for root in modules for sub in root.modules()):
            for table in (m._parameters, m._buffers):
                for name, t in table.items():
                    if t is None or t.device.type != "cpu":
                        continue
                    if id(t) not in moved:
                        with torch.no_grad():
                            new = t.to("cuda")
                        if isinstance(t, torch.nn.Parameter):
                            new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
                        moved[id(t)] = (t, new)
                    table[name] = moved[id(t)][1]

    try:  # FSDP1 (FullyShardedDataParallel) moves a CPU model with device_id the same way
        from torch.distributed.fsdp import _init_utils as fsdp1_init
    except ImportError:
        fsdp1_init = None
    if fsdp1_init is not None and hasattr(fsdp1_init, "_move_module_to_device"):
        move = fsdp1_init._move_module_to_device

        def _move_module_to_device(module, ignored_params, ignored_buffers,
                                   device_from_device_id):
            if device_from_device_id is not None and device_from_device_id.type == "cuda":
                to_gpu([module])
            return move(module, ignored_params, ignored_buffers, device_from_device_id)

        fsdp1_init._move_module_to_device = _move_module_to_device

    @functools.wraps(original)
    def fully_shard(module, *args, **kwargs):
        mesh = kwargs.get("mesh")
        if mesh is None or mesh.device_type == "cuda":
            to_gpu([module] if isinstance(module, torch.nn.Module) else list(module))
        return original(module, *args, **kwargs)

    fully_shard_module.fully_shard = fully_shard
    # Where programs import it from (torch.distributed._composable.fsdp: before torch 2.6).
    for name in ("torch.distributed.fsdp._fully_shard", "torch.distributed.fsdp",
                 "torch.distributed._composable.fsdp"):
        try:
            package = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(package, "fully_shard", None) is original:
            package.fully_shard = fully_shard


def _install_ddp(torch, dist):
    """DistributedDataParallel: its reducer's buckets (as large as the gradients) are made in C++
    from the parameters' options, the CPU's to libtorch: made while the reducer is built or
    rebuilt (before the second forward), they are simulated GPU tensors. Its gradients'
    all-reduce, which the fake backend completes with no value, is done by a communication hook
    that returns the bucket (unless the program registers its own)."""
    from torch.nn.parallel import distributed as ddp_module

    reducer = dist.Reducer

    def simulated_reducer(*args, **kwargs):
        with gpu_device.factories_on_gpu("gradients"):
            return reducer(*args, **kwargs)

    dist.Reducer = simulated_reducer
    ddp = ddp_module.DistributedDataParallel
    pre_forward = ddp._pre_forward

    # The buckets of the last backward's all-reduces: NCCL's works hold their tensors until its
    # watchdog sees them complete (it looks every 100 ms or so). A program that never waits for
    # the GPU runs ahead of it, and the first step's buckets, replaced when DDP rebuilds them
    # before the second forward, were still allocated at the second step's peak (gpt2_ddp on
    # 4 x H200: the real peak is the simulated one plus those buckets, to 0.002%); one that
    # reads a value each step (the Trainer's logging) had them freed by then (llama_trainer_ddp).
    # Held until the program waits for the GPU or the next backward's first all-reduce.
    held = []
    gpu_device.on_wait(held.clear)

    def bucket_as_reduced(state, bucket):
        if bucket.index() == 0:
            held.clear()
        held.append(bucket.buffer())
        future = torch.futures.Future()
        future.set_result(bucket.buffer())
        return future

    def _pre_forward(self, *args, **kwargs):
        if not self._comm_hooks and not getattr(self, "_memprof_builtin_hook", False):
            self.register_comm_hook(None, bucket_as_reduced)
        # The buckets are rebuilt here, in the order the gradients came.
        with gpu_device.factories_on_gpu("gradients"):
            return pre_forward(self, *args, **kwargs)

    builtin = ddp._register_builtin_comm_hook

    def _register_builtin_comm_hook(self, comm_hook_type):
        self._memprof_builtin_hook = True
        return builtin(self, comm_hook_type)

    ddp._pre_forward = _pre_forward
    ddp._register_builtin_comm_hook = _register_builtin_comm_hook
