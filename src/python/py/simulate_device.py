# `--simulate-gpu`'s device: torch.cuda and torch.accelerator answer as one GPU of the model
# named, for the rest of the run: available, its properties, streams and events (a stream's
# number goes into the trace), the generator's state, pinned memory, CUDA-graph capture queries,
# and the memory readings of the simulated allocations (simulate_ledger.py).
import contextlib

import _memprof_simulate_ledger as ledger


class Properties:
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
        self.L2_cache_size = 0
        self.warp_size = 32
        self.max_threads_per_multi_processor = 2048
        self.regs_per_multiprocessor = 65536
        self.uuid = "00000000-0000-0000-0000-000000000000"

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count}) [simulated by memprof]")


class Stream:
    """A simulated CUDA stream: numbered in order of creation (0: the default stream), the
    number the trace gives the allocations made while it is current."""

    count = 0
    device = None  # cuda:0, once installed
    device_index = 0
    device_type = 1  # CUDA, as torch.Stream numbers device types

    def __init__(self, device=None, priority=0, **kwargs):
        Stream.count += 1
        self.stream_id = Stream.count
        self.priority = priority

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        return event if event is not None else Event()

    def query(self):
        return True

    def synchronize(self):
        waited()

    def is_capturing(self):
        return False  # no CUDA graph is captured

    @property
    def cuda_stream(self):
        return self.stream_id

    def __eq__(self, other):
        return isinstance(other, Stream) and other.stream_id == self.stream_id

    def __hash__(self):
        return hash(("memprof-simulated-stream", self.stream_id))

    def __repr__(self):
        return f"<torch.cuda.Stream device=cuda:0 id={self.stream_id} (simulated)>"


class DefaultStream(Stream):
    def __init__(self):
        self.stream_id = 0
        self.priority = 0


class Event:
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
        waited()

    def elapsed_time(self, end_event):
        return 0.0


# What happens when the program waits for the GPU (a value read, a synchronize): the GPU has
# caught up, and what its finished work held can go (simulate_distributed.py's all-reduces).
_on_wait = []


def on_wait(callback):
    _on_wait.append(callback)


def waited():
    """The program waited for the GPU to finish what it asked so far."""
    for callback in _on_wait:
        callback()


_default_stream = DefaultStream()
_current_stream = []
# > 0 while libtorch's C++ makes tensors from a simulated tensor's options, the CPU's to it (a
# DistributedDataParallel reducer's buckets): its floating-point factories make simulated GPU
# tensors (simulate.py).
_factories_on_gpu = []  # the role of what they make ("gradients"), innermost last


@contextlib.contextmanager
def factories_on_gpu(role):
    _factories_on_gpu.append(role)
    try:
        yield
    finally:
        _factories_on_gpu.pop()


def cpu_factories_on_gpu():
    """None, or the role of what the CPU's floating-point factories make now on the GPU."""
    return _factories_on_gpu[-1] if _factories_on_gpu else None


def stream_now():
    """The trace's number of the stream current now (0: the default one)."""
    return _current_stream[-1].stream_id if _current_stream else 0


def _streams_and_events():
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
        "Stream": Stream,
        "Event": Event,
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


def _memory_readings(props):
    """The memory readings: the simulated allocations in the allocator's 512-byte blocks;
    reserved and active bytes read as allocated (the caching allocator's model replays the trace
    afterwards for the reserved bytes); what only a real allocator knows, 0."""

    def allocated(device=None):
        return ledger.allocated()

    def max_allocated(device=None):
        return ledger.peak()

    def reset_peak(device=None):
        ledger.reset_peak()

    def memory_stats(device=None):
        now, peak = ledger.allocated(), ledger.peak()
        live = ledger.live_allocations()
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

    return {
        "memory_allocated": allocated,
        "max_memory_allocated": max_allocated,
        "memory_reserved": allocated,
        "max_memory_reserved": max_allocated,
        "reset_peak_memory_stats": reset_peak,
        "reset_max_memory_allocated": reset_peak,
        "mem_get_info": lambda device=None: (props.total_memory - ledger.allocated(),
                                             props.total_memory),
        "memory_stats": memory_stats,
    }


def install(torch, gpu):
    """From now on torch.cuda and torch.accelerator answer as one `gpu` (memprof's GPU model,
    as a dict), and the ledger numbers allocations by the stream current."""
    Stream.device = torch.device("cuda", 0)
    ledger.stream_now = stream_now
    props = Properties(gpu)
    record_stream = torch.Tensor.record_stream

    def record_on(self, stream):
        # A simulated stream is never busy: what the caching allocator would delay for its work
        # (a block freed while that stream may still use it) is not modelled.
        if not isinstance(stream, Stream):
            return record_stream(self, stream)

    torch.Tensor.record_stream = record_on

    def nothing():
        # A function of its own for each name: dynamo maps torch's functions by identity to
        # how it traces each, and refuses one object under two names with different rules.
        return lambda *args, **kwargs: None

    answers = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "_lazy_init": nothing(),
        "init": nothing(),
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": nothing(),
        "synchronize": lambda device=None: waited(),
        "empty_cache": nothing(),
        # A cap is the replay's to apply (`memprof fit --memory`): nothing runs out here.
        "set_per_process_memory_fraction": nothing(),
        "get_device_name": lambda device=None: props.name,
        "get_device_capability": lambda device=None: (props.major, props.minor),
        "get_device_properties": lambda device=None: props,
        "is_bf16_supported": lambda including_emulation=True: props.major >= 8,
        "manual_seed": nothing(),
        "manual_seed_all": nothing(),
        "seed": nothing(),
        "seed_all": nothing(),
        "is_current_stream_capturing": lambda: False,  # no CUDA graph is captured
    }
    answers.update(_memory_readings(props))
    answers.update(_streams_and_events())
    answers.update(_random_state(torch))
    for name, value in answers.items():
        setattr(torch.cuda, name, value)
    # The submodules whose functions torch.cuda re-exports, for code that calls them there.
    for module, names in (("torch.cuda.graphs", ("is_current_stream_capturing",)),
                          ("torch.cuda.memory", ("memory_allocated", "max_memory_allocated",
                                                 "memory_reserved", "max_memory_reserved",
                                                 "reset_peak_memory_stats", "empty_cache",
                                                 "mem_get_info", "memory_stats"))):
        try:
            target = __import__(module, fromlist=["_"])
        except ImportError:
            continue
        for name in names:
            setattr(target, name, answers[name])
    _install_accelerator(torch)
    # Pinned host memory is the driver's (a DataLoader's pin_memory=True): the CPU tensor itself
    # stands for it, and is never device memory.
    torch.Tensor.pin_memory = lambda self, device=None: self


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
        "synchronize": lambda device=None: waited(),
        "current_stream": lambda device=None: torch.cuda.current_stream(),
    }
    for name, value in answers.items():
        if hasattr(accelerator, name):
            setattr(accelerator, name, value)
    torch._C._get_accelerator = lambda check=False: torch.device("cuda")
