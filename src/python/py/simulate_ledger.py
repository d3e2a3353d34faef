# `--simulate-gpu`'s ledger: what the simulated GPU's caching allocator is asked, in order (each
# allocation of a simulated tensor's storage with its size, stream, line and category; each free
# when the last tensor on a storage is gone), the workspaces the GPU's libraries take beside the
# tensors, the notes of where the simulation stood in for the GPU, and the allocation trace
# written from it at the end (model/trace.rs). Uses nothing of memprof's other modules.
import json
import os
import re
import sys
import weakref

_gpu = None
_is_user_file = None
_state = None
_current_node = None
_ranks = 0  # --simulate-ranks: the run is rank 0 of these (0: no process group simulated)
# id(tensor) -> (its finalizer, the storages it counts on): one finalizer per tensor, so that a
# swap of two tensors' contents can move them with the contents (take_contents).
_held = {}


def stream_now():
    """The trace's number of the stream current now (0: the default); the simulated device's
    streams replace it (simulate_device.py)."""
    return 0


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
        self.notes = {}  # ("file:line", what happened there) -> None, in order
        self.workspaces = set()  # the (library, thread, stream) handles that have one


def start(gpu, is_user_file, torch, ranks=0):
    """A fresh ledger for `gpu` (memprof's GPU model, as a dict), as rank 0 of `ranks` when
    not 0; `is_user_file` says which files are the program's (the line an allocation is at)."""
    global _gpu, _is_user_file, _state, _current_node, _ranks
    _gpu, _is_user_file, _state, _ranks = gpu, is_user_file, _State(), ranks
    _current_node = getattr(torch._C, "_current_autograd_node", None)


_MODULE_CALL = os.path.join("torch", "nn", "modules", "module.py")
_CALLS = ("_call_impl", "_wrapped_call_impl")


def _site():
    """The innermost line of the program's own code on the stack, as `file:line`, and whether
    an nn.Module is being called (a frame of its __call__). memprof's own frames are named
    `<memprof ...>`, never the program's."""
    f = sys._getframe(2)
    in_module = False
    site = None
    while f is not None:
        code = f.f_code
        name = code.co_filename
        if site is None and _is_user_file(name):
            if name in _generated_files():
                # Inductor's generated code: the line its buffer's FX node came from, else
                # the line that called the graph (further out).
                site = _generated_site(name, f.f_lineno)
            else:
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
            if _is_user_file(name):
                site = f"{_label(name)}:{f.f_lineno}"
            f = f.f_back
    return site or "<unknown>", in_module


def _generated_files():
    """Inductor's map from each generated wrapper's lines to the stack traces of the FX nodes
    they came from (torch keeps it for its profiler), by the wrapper's path."""
    codecache = sys.modules.get("torch._inductor.codecache")
    cache = getattr(codecache, "PyCodeCache", None)
    return getattr(cache, "linemaps", None) or {}


_generated = {}  # (path, line) -> the program's line it came from, or None


def _generated_site(path, line):
    key = (path, line)
    if key in _generated:
        return _generated[key]
    starts, traces = _generated_files().get(path) or ((), ())
    trace = None
    for start, t in zip(starts, traces):
        if int(start) > line:
            break
        trace = t
    site = None
    # The innermost frame of the program's own in the node's stack trace (outermost first).
    for name, number in re.findall(r'File "(.+)", line (\d+), in ', trace or ""):
        if _is_user_file(name):
            site = f"{_label(name)}:{number}"
    _generated[key] = site
    return site


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
    s.events.append({"alloc": ident, "size": int(nbytes), "stream": stream_now(), "at": at})
    s.allocated += _block(nbytes)
    if s.allocated > s.peak:
        s.peak = s.allocated
    s.site[ident] = at
    s.born_in_pass[ident] = _passes()
    if in_module:
        s.in_module.add(ident)
    if role is not None:
        s.role[ident] = role
    if in_backward():
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
    _release_block(entry)


def _release_block(entry):
    """The allocation under a storage given back (its last tensor died, or it was resized)."""
    s = _state
    if entry[0] is None:
        return  # resized to nothing before: given back then
    s.events.append({"free": entry[0]})
    s.allocated -= _block(entry[2])
    if in_backward():
        s.freed_in_backward.add(entry[0])
    elif s.born_in_pass.pop(entry[0], -1) == _passes() and _site()[0] == s.site.get(entry[0]):
        # Its line's intermediate: freed there before another backward pass began (the same
        # line run again in the next step frees the last step's result, which was held).
        s.freed_at_own_line.add(entry[0])


def is_simulated_storage(storage):
    """Whether `storage` is a simulated tensor's (one the ledger tracks)."""
    return storage._cdata in _state.live


def resized(storage, nbytes):
    """A simulated tensor's storage resized in place (`untyped_storage().resize_(n)`: FSDP2
    frees an unsharded parameter's memory with resize_(0) while autograd keeps the tensor, and
    gets it back with resize_(size)): its allocation is given back, and one of the new size made
    at this line."""
    entry = _state.live.get(storage._cdata)
    if entry is None:
        return
    # What is resized back is a sharded model's gathered parameters (FSDP2's, FSDP1's flat ones).
    role = _state.role.get(entry[0], "parameters") if entry[0] is not None else "parameters"
    _release_block(entry)
    entry[0], entry[2] = (_allocate(nbytes, role), int(nbytes)) if nbytes > 0 else (None, 0)


def in_backward():
    """Whether a backward pass is running a node on this thread (what it allocates is
    autograd's)."""
    return _current_node is not None and _current_node() is not None


def in_custom_backward():
    """Whether the backward of a custom autograd Function (a compiled graph's) runs now."""
    return _current_node is not None and hasattr(_current_node(), "_forward_cls")


def _passes():
    """The backward passes begun so far (one begins where an event in a backward follows one
    outside)."""
    s = _state
    now = in_backward()
    if now and not s.was_backward:
        s.passes += 1
    s.was_backward = now
    return s.passes


def _storage_key(t):
    try:
        return t.untyped_storage()._cdata
    except Exception:
        return None


def track(t, role=None):
    """A simulated tensor the program can hold: a new storage is an allocation, freed when the
    last tensor on it is."""
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


def _release(ident):
    held = _held.pop(ident, None)
    if held is not None:
        for key in held[1]:
            _free(key)


def retracked(t):
    """`t` now holds another storage (its `.data` was given a new tensor): it no longer counts
    on the old one, and counts on the new."""
    held = _held.get(id(t))
    if held is not None:
        old, held[1][:] = held[1][:], []
        for key in old:
            _free(key)
    track(t)


def name_role(t, role):
    """Names what a live tensor's storage is (parameters, gradients, optimizer state); of a
    tensor subclass around simulated tensors (a DTensor: a rank's shard), theirs."""
    flatten = getattr(type(t), "__tensor_flatten__", None)
    if flatten is not None:
        for name in flatten(t)[0]:
            name_role(getattr(t, name), role)
        return
    key = _storage_key(t)
    entry = _state.live.get(key) if key is not None else None
    if entry is not None:
        _state.role[entry[0]] = role


def note(what):
    """Where the simulation stood in for the GPU, at the program's line."""
    at, _ = _site()
    _state.notes.setdefault((at, what), None)


# The workspaces the GPU's libraries take from the caching allocator, once per handle (a thread
# and a stream), and keep to the end: the GPU model's key for each one's size.
_WORKSPACE_SIZES = {"cublas": "cublas_workspace", "cublaslt": "cublaslt_workspace"}


def workspace(library):
    """The first call of `library` on this handle: its workspace. A backward runs on autograd's
    device thread on a GPU, whose handles are its own."""
    handle = (library, "autograd" if in_backward() else "program", stream_now())
    if handle in _state.workspaces:
        return
    _state.workspaces.add(handle)
    size = _gpu[_WORKSPACE_SIZES[library]]
    if size > 0:
        _allocate(size, "workspaces")


def scratch(nbytes):
    """A library's workspace for one call (a cuDNN plan's): taken from the caching allocator
    after the call's outputs and given back before the call returns."""
    if nbytes > 0:
        _release_block([_allocate(nbytes, "workspaces"), 0, int(nbytes)])


def allocated():
    return _state.allocated


def peak():
    return _state.peak


def reset_peak():
    _state.peak = _state.allocated


def live_allocations():
    return len(_state.live)


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


def write_trace(path, torch_version):
    """The allocation trace of the run so far (model/trace.rs), with each allocation's category
    and the notes."""
    s = _state
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
            **({"ranks": _ranks} if _ranks else {}),
            "notes": [{"at": at, "what": what} for at, what in s.notes],
        },
        "events": s.events,
    }
    with open(path, "w") as f:
        json.dump(trace, f)
