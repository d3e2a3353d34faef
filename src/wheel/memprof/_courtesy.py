"""`memprof.courtesy()`: lend the GPU for a while. Every tensor on the device that the program can
reach (parameters, their gradients, buffers, optimizer state, the frames' and modules' tensors) is
moved to CPU memory in place, the caching allocator's cache is emptied, and `restore()` moves them
back: each tensor keeps its identity (the same Python object, so models and optimizers hold the
same tensors), its dtype, shape, strides, storage offset, `requires_grad` and `is_leaf`, and
tensors that shared a storage share one again. pytorch_memlab's `Courtesy`, with a report of
what moved and what could not.

How: tensors are found by the garbage collector's walk (and each parameter's and leaf's `.grad`,
made visible to Python first), grouped by storage. A storage moves only when every reference to
it is a tensor in its group (`torch._C._storage_Use_Count`): a storage also held where Python
cannot reach (autograd's copies of saved outputs, DDP's gradient buckets, C++ caches, tensors
in a CUDA graph's private pool) stays, and the report names it. A moved storage is copied once
and each of its tensors is pointed at the copy (`tensor.data = view of the copy`), which keeps
the object and its autograd state.
"""
import gc
import warnings

import torch

# The caching allocator's block granularity: memory_allocated() counts blocks, not bytes asked.
_BLOCK = 512

_CATEGORIES = ("parameters", "gradients", "buffers", "optimizer_state", "other")


def _round(n):
    return (n + _BLOCK - 1) // _BLOCK * _BLOCK


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return "%d B" % n if unit == "B" else "%.2f %s" % (n, unit)
        n /= 1024.0


class CourtesyReport:
    """What `yield_memory()` moved and what it kept on the device.

    moved_bytes, moved_tensors, moved_storages; moved_by_category (parameters, gradients,
    buffers, optimizer_state, other: bytes of storages, each counted once by its first tensor's
    category in that order); kept: [{"reason", "storages", "tensors", "bytes"}] (bytes rounded
    to the allocator's 512-byte blocks); allocated_before / allocated_after: the device's
    memory_allocated() before and after; reserved_after: memory_reserved() after the cache was
    emptied; unreachable_bytes: allocated_after minus what `kept` explains, memory that no
    tensor Python can reach holds (a C++ cache, an autograd graph's saved outputs' own storage
    when no Python tensor shares it)."""

    def __init__(self, device):
        self.device = str(device)
        self.moved_bytes = 0
        self.moved_tensors = 0
        self.moved_storages = 0
        self.moved_by_category = {c: 0 for c in _CATEGORIES}
        self.kept = []
        self.allocated_before = 0
        self.allocated_after = 0
        self.reserved_after = 0
        self.unreachable_bytes = 0

    def to_dict(self):
        return {k: getattr(self, k) for k in (
            "device", "moved_bytes", "moved_tensors", "moved_storages", "moved_by_category",
            "kept", "allocated_before", "allocated_after", "reserved_after",
            "unreachable_bytes")}

    def __str__(self):
        lines = ["memprof courtesy on %s: moved %s (%d tensors, %d storages) to CPU memory" % (
            self.device, _human(self.moved_bytes), self.moved_tensors, self.moved_storages)]
        parts = ["%s %s" % (c.replace("_", " "), _human(b))
                 for c, b in self.moved_by_category.items() if b]
        if parts:
            lines.append("  moved: " + ", ".join(parts))
        for k in self.kept:
            lines.append("  kept on the device: %s in %d storage(s), %d tensor(s): %s" % (
                _human(k["bytes"]), k["storages"], k["tensors"], k["reason"]))
        lines.append("  device allocated: %s before, %s after (reserved after emptying the cache: %s)"
                     % (_human(self.allocated_before), _human(self.allocated_after),
                        _human(self.reserved_after)))
        if self.unreachable_bytes:
            lines.append("  held by nothing Python can reach: %s" % _human(self.unreachable_bytes))
        return "\n".join(lines)

    __repr__ = __str__


def _device_of(device):
    if device is None:
        return torch.device("cuda", torch.cuda.current_device())
    if isinstance(device, int):
        return torch.device("cuda", device)
    d = torch.device(device)
    if d.type == "cuda" and d.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return d


def _graph_pool_ranges(device):
    """[start, end) of the device's segments in CUDA graphs' private pools."""
    if device.type != "cuda":
        return []
    ranges = []
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device") == device.index and tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0):
            ranges.append((seg["address"], seg["address"] + seg["total_size"]))
    return ranges


def _allocated(device):
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else 0


class Courtesy:
    """Moves the program's tensors off `device` (default: the current CUDA device) and back.

        courtesy = memprof.Courtesy()
        report = courtesy.yield_memory()    # the GPU is free but for what could not move
        ...                                 # another process uses it
        courtesy.restore()                  # the training goes on

    or `with memprof.courtesy() as report: ...`. `device="cpu"` moves CPU tensors to fresh CPU
    storages and back (what the tests use to check the bookkeeping where there is no GPU);
    `pin_memory=True` keeps the copies in pinned memory (faster back, but pinned)."""

    def __init__(self, device=None, pin_memory=False):
        self._device = device
        self._pin = pin_memory
        self._moved = None
        self.report = None

    def yield_memory(self):
        if self._moved is not None:
            raise RuntimeError("memprof.Courtesy: yield_memory() again before restore()")
        device = _device_of(self._device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        report = CourtesyReport(device)
        report.allocated_before = _allocated(device)
        groups, skipped = _find(device)
        pools = _graph_pool_ranges(device)
        kept = {}
        moved = []
        for storage_key, group in groups.items():
            tensors = [t for t, _ in group]
            storage = tensors[0].untyped_storage()
            nbytes = storage.nbytes()
            reason = None
            if any(start <= storage_key < end for start, end in pools):
                reason = "in a CUDA graph's private pool (its replays read it there)"
            else:
                # Every reference to the storage is one of these tensors (+1: `storage` above).
                refs = torch._C._storage_Use_Count(storage._cdata)
                if refs != len(tensors) + 1:
                    reason = ("held also where Python cannot reach (autograd's saved outputs, "
                              "DDP's gradient buckets, a C++ cache)")
            if reason is not None:
                k = kept.setdefault(reason, {"reason": reason, "storages": 0, "tensors": 0, "bytes": 0})
                k["storages"] += 1
                k["tensors"] += len(tensors)
                k["bytes"] += _round(nbytes)
                continue
            del storage
            moved.append(_move_group(group, torch.device("cpu"), self._pin))
            report.moved_storages += 1
            report.moved_tensors += len(group)
            report.moved_bytes += nbytes
            first = min((_CATEGORIES.index(c) for _, c in group))
            report.moved_by_category[_CATEGORIES[first]] += nbytes
        for reason, (count, nbytes) in skipped.items():
            kept[reason] = {"reason": reason, "storages": count, "tensors": count, "bytes": nbytes}
        groups = None
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
            report.reserved_after = torch.cuda.memory_reserved(device)
        report.kept = list(kept.values())
        report.allocated_after = _allocated(device)
        if device.type == "cuda":
            explained = sum(k["bytes"] for k in report.kept)
            report.unreachable_bytes = max(0, report.allocated_after - explained)
        self._moved = (device, moved)
        self.report = report
        return report

    def restore(self):
        """Moves every tensor that yield_memory() moved back to its device."""
        if self._moved is None:
            raise RuntimeError("memprof.Courtesy: restore() without yield_memory()")
        device, moved = self._moved
        for group in moved:
            _move_back(group, device)
        self._moved = None
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def __enter__(self):
        return self.yield_memory()

    def __exit__(self, *exc):
        self.restore()
        return False


def courtesy(device=None, pin_memory=False):
    """`with memprof.courtesy() as report:` lends the GPU for the block (see `Courtesy`)."""
    return Courtesy(device, pin_memory)


def _find(device):
    """The tensors on `device` that Python can reach, grouped by their storage's address:
    {address: [(tensor, category)]}; and what was found but cannot move, by reason:
    {reason: (count, bytes)}."""
    categories = {}
    tensors = []
    modules = []
    optimizers = []
    # isinstance() on some module-level objects warns (torch.distributed.reduce_op): the walk
    # must not print anything of the program's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for obj in gc.get_objects():
            try:
                if isinstance(obj, torch.Tensor):
                    tensors.append(obj)
                elif isinstance(obj, torch.nn.Module):
                    modules.append(obj)
                elif isinstance(obj, torch.optim.Optimizer):
                    optimizers.append(obj)
            except Exception:  # an object whose isinstance check fails (a lazy proxy)
                continue
    # A leaf's gradient, made a Python object here if it was not one (its storage is then
    # counted with its tensor).
    grads = []
    for t in tensors:
        if t.is_leaf and t.requires_grad and t.grad is not None:
            grads.append(t.grad)
            categories[id(grads[-1])] = "gradients"
    for m in modules:
        for b in m.buffers(recurse=False):
            categories.setdefault(id(b), "buffers")
    for opt in optimizers:
        for state in opt.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor):
                    categories.setdefault(id(v), "optimizer_state")
    seen = set()
    everything = []

    def add(t, category):
        if id(t) in seen:
            return
        seen.add(id(t))
        everything.append((t, category))

    for t in tensors + grads:
        if isinstance(t, torch.nn.Parameter):
            add(t, "parameters")
        else:
            add(t, categories.get(id(t), "other"))
    groups = {}
    skipped = {}
    for t, category in everything:
        try:
            if t.device != device:
                continue
        except Exception:
            continue
        reason = None
        if t.layout != torch.strided:
            reason = "not a strided tensor (%s)" % t.layout
        else:
            try:
                storage = t.untyped_storage()
                if storage.nbytes() == 0:
                    continue
                address = storage.data_ptr()
                del storage
                if type(t) not in (torch.Tensor, torch.nn.Parameter) and \
                        type(t).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
                    reason = "a tensor subclass (its inner tensors move on their own)"
            except Exception:
                reason = "a tensor subclass without a storage of its own"
        if reason is not None:
            count, nbytes = skipped.get(reason, (0, 0))
            skipped[reason] = (count + 1, nbytes)
            continue
        groups.setdefault(address, []).append((t, category))
    return groups, skipped


def _move_group(group, to, pin):
    """Copies the group's storage to `to` once and points each tensor at the copy; what
    `_move_back` needs."""
    first = group[0][0]
    storage = first.untyped_storage()
    source = torch.empty(0, dtype=torch.uint8, device=first.device).set_(storage)
    copy = torch.empty(source.shape, dtype=torch.uint8, device=to, pin_memory=pin and to.type == "cpu")
    copy.copy_(source)
    copy_storage = copy.untyped_storage()
    places = []
    with torch.no_grad():
        for t, _ in group:
            place = (t, t.storage_offset(), tuple(t.size()), tuple(t.stride()))
            t.data = torch.empty(0, dtype=t.dtype, device=to).set_(copy_storage, *place[1:])
            places.append(place)
    return copy_storage, places


def _move_back(moved, device):
    copy_storage, places = moved
    back = torch.empty(0, dtype=torch.uint8).set_(copy_storage).to(device, copy=True)
    storage = back.untyped_storage()
    with torch.no_grad():
        for t, offset, size, stride in places:
            t.data = torch.empty(0, dtype=t.dtype, device=device).set_(storage, offset, size, stride)

