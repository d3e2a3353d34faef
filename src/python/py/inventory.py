# memprof's tensor inventory (`memprof run --tensors`), run inside the profiled interpreter.
#
# At the end of a targeted call, or when an exception leaves one, it lists the live tensors on
# the profiled device, grouped by storage (views and tied weights count once), names them from
# the models and optimizers it finds (`layer1.0.conv1.weight`, `….grad`,
# `optimizer.state[layer1.0.conv1.weight].exp_avg`) or from the targeted frames' variables,
# and totals them by category against the allocator's allocated bytes. A sharded DTensor
# parameter (FSDP2, tensor parallelism) counts by its local shard, with its full size beside it. It holds the objects it
# inspects only while it scans (the list from gc.get_objects() and nothing derived from it
# survives the call), and an object that fails or vanishes while inspected is skipped.
import gc
import sys
from itertools import compress, islice

import _memprof

CATEGORIES = ("parameters", "buffers", "gradients", "optimizer_state", "other")
# A storage named in several ways takes the first category in this order.
_RANK = {c: i for i, c in enumerate(CATEGORIES)}
TOP = 40
# The items of a frame's container (dict, list, tuple) looked at for tensors to name.
CONTAINER_ITEMS = 100_000


class _Kinds(dict):
    """type -> 1 (tensor), 2 (module), 3 (optimizer) or 0, decided on first sight."""

    def __init__(self, *bases):
        super().__init__()
        self.bases = bases

    def __missing__(self, t):
        kind = 0
        try:
            for i, base in enumerate(self.bases):
                if issubclass(t, base):
                    kind = i + 1
                    break
        except Exception:
            pass
        self[t] = kind
        return kind


class _Storage:
    __slots__ = ("ptr", "bytes", "category", "names", "tensors", "shape", "dtype", "full")

    def __init__(self, ptr, nbytes, shape, dtype):
        self.ptr = ptr
        self.bytes = nbytes
        # The full size of the DTensor this storage is the local shard of, if it is one.
        self.full = None
        self.category = "other"
        self.names = []
        self.tensors = 0
        self.shape = shape
        self.dtype = dtype

    def name(self, name, category):
        if name not in self.names:
            self.names.append(name)
        if _RANK[category] < _RANK[self.category]:
            self.category = category


def take(device_type, device_index, label, frames, fallback_frames=()):
    """The inventory now, as a dict for the report; `frames` are targeted frames whose local
    variables name the tensors they hold; `fallback_frames` name only what nothing else names."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    objects = gc.get_objects()
    try:
        return _scan(torch, objects, device_type, device_index, label, frames, fallback_frames)
    finally:
        objects.clear()
        del objects


def roles(torch, device_type, device_index):
    """[(storage data_ptr, category)] of every storage on the device that a tensor in memory
    holds: the category the models and optimizers name it by (parameters, buffers, gradients,
    optimizer_state), else "other" (held by a tensor the program can reach)."""
    objects = gc.get_objects()
    try:
        storages, _ = _collect(torch, objects, device_type, device_index, ())
    finally:
        objects.clear()
        del objects
    return [(s.ptr, s.category) for s in storages.values()]


def _collect(torch, objects, device_type, device_index, frames, fallback_frames=()):
    """The storages on the device, named by the models, optimizers and frames that hold them;
    and how many objects failed to be inspected."""
    Tensor, Module = torch.Tensor, torch.nn.Module
    Optimizer = torch.optim.Optimizer

    if device_type == "cpu":
        def on_device(t):
            return t.is_cpu
    else:
        def on_device(t):
            return t.is_cuda and t.get_device() == device_index

    storages = {}
    skipped = 0

    def storage_of(t):
        nonlocal skipped
        try:
            if fake is not None and issubclass(type(t), fake):
                return None
            if not on_device(t):
                return None
            st = t.untyped_storage()
            key = st.data_ptr()
            s = storages.get(key)
            if s is None:
                s = storages[key] = _Storage(
                    key, st.nbytes(), list(t.shape), str(t.dtype).replace("torch.", "")
                )
            return s
        except Exception:
            skipped += 1
            return None

    def sharded(t):
        """The local shard of a DTensor parameter or gradient, and its full size; (t, None) for
        a plain tensor."""
        local = getattr(t, "_local_tensor", None) if dtensor is not None else None
        if local is None:
            return t, None
        return local, t.numel() * t.element_size()

    def name_storage(t, name, category):
        local, full = sharded(t)
        s = storage_of(local)
        if s is not None:
            s.name(name, category)
            if full is not None:
                s.full = full

    modules, optimizers = [], []
    # The kind of each type is decided once, and the objects of the wanted types are picked out
    # by C loops (compress/map), since the program may hold millions of objects. type(), not
    # isinstance(): isinstance may read `__class__`, which runs arbitrary code (deprecation
    # warnings, proxies of dead objects). A DTensor is skipped here: gc finds its local shard.
    dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
    # torch.compile's fake tensors have no memory, and reading their data pointer warns.
    fake = getattr(sys.modules.get("torch._subclasses.fake_tensor"), "FakeTensor", None)
    # Kinds after this shift: <= 0 skipped (DTensor, FakeTensor), 1 tensor, 2 module, 3 optimizer.
    bases = tuple(t for t in (dtensor, fake) if t is not None)
    shift = len(bases)
    kinds = _Kinds(*bases, Tensor, Module, Optimizer)
    for o in compress(objects, map(kinds.__getitem__, map(type, objects))):
        try:
            kind = kinds[type(o)] - shift
            if kind <= 0:
                continue
            if kind == 1:
                s = storage_of(o)
                if s is not None:
                    s.tensors += 1
            elif kind == 2:
                modules.append(o)
            else:
                optimizers.append(o)
        except Exception:
            skipped += 1

    # Models: the modules that are no other module's child, named by class when there are several.
    children = set()
    for m in modules:
        try:
            children.update(id(c) for c in m.children())
        except Exception:
            pass
    roots = [m for m in modules if id(m) not in children]
    param_names = {}
    for i, root in enumerate(roots):
        prefix = "" if len(roots) == 1 else f"{type(root).__name__}#{i + 1}."
        try:
            for name, p in root.named_parameters(remove_duplicate=False):
                param_names.setdefault(id(p), prefix + name)
                name_storage(p, prefix + name, "parameters")
                g = p.grad
                if g is not None:
                    name_storage(g, prefix + name + ".grad", "gradients")
            for name, b in root.named_buffers(remove_duplicate=False):
                s = storage_of(b)
                if s is not None:
                    s.name(prefix + name, "buffers")
        except Exception:
            skipped += 1

    for i, opt in enumerate(optimizers):
        oname = "optimizer" if len(optimizers) == 1 else f"optimizer#{i + 1}"
        try:
            for p, state in list(opt.state.items()):
                pname = param_names.get(id(p), f"<param {list(p.shape)}>")
                for k, v in list(state.items()):
                    if issubclass(type(v), Tensor):
                        name_storage(v, f"{oname}.state[{pname}].{k}", "optimizer_state")
        except Exception:
            skipped += 1

    for fallback, group in ((False, frames), (True, fallback_frames)):
        for frame in group:
            try:
                qual = frame.f_code.co_qualname if hasattr(frame.f_code, "co_qualname") else frame.f_code.co_name
                for var, v in list(frame.f_locals.items()):
                    if issubclass(type(v), Tensor):
                        s = storage_of(sharded(v)[0])
                        if s is not None and s.category == "other" and not (fallback and s.names):
                            s.name(f"{qual}:{var}", "other")
                    elif type(v) in (dict, list, tuple):
                        # A cache or a history kept in a container: `cache[3]`, `losses[-1]`.
                        items = v.items() if type(v) is dict else enumerate(v)
                        for k, x in islice(list(items), CONTAINER_ITEMS):
                            if issubclass(type(x), Tensor):
                                s = storage_of(sharded(x)[0])
                                if s is not None and s.category == "other" and not s.names:
                                    s.name(f"{qual}:{var}[{k!r}]", "other")
            except Exception:
                skipped += 1
    return storages, skipped


def _rows(storages):
    """The listed rows, largest first. Storages alike (the same category, shape, dtype and place
    of creation, and unnamed or items of one container) are one row with their count: a dict
    that keeps a tensor a step is `cache[…]`, 49 storages, not 49 rows."""
    groups = {}
    for s in storages:
        created = None
        if s.category == "other":
            where = _memprof.created_at(s.ptr)
            if where is not None:
                qualname, filename, line = where
                created = f"{filename}:{line} ({qualname})"
        name = ", ".join(s.names) if s.names else None
        container = None
        if name is not None and len(s.names) == 1 and name.endswith("]") and "[" in name:
            container = name[:name.index("[")] + "[…]"
        alike = container or (None if name is None else id(s))
        key = (s.category, tuple(s.shape), s.dtype, created, alike)
        row = groups.get(key)
        if row is None:
            groups[key] = row = {"name": name, "category": s.category, "bytes": 0,
                                 "shape": s.shape, "dtype": s.dtype, "tensors": 0,
                                 "created_at": created, "storages": 0}
        row["bytes"] += s.bytes
        row["tensors"] += s.tensors
        row["storages"] += 1
        if row["storages"] > 1:
            row["name"] = container
    return sorted(groups.values(), key=lambda r: -r["bytes"])


def _scan(torch, objects, device_type, device_index, label, frames, fallback_frames=()):
    storages, skipped = _collect(torch, objects, device_type, device_index, frames, fallback_frames)
    totals = {c: 0 for c in CATEGORIES}
    counts = {c: 0 for c in CATEGORIES}
    full = {}
    for s in storages.values():
        totals[s.category] += s.bytes
        counts[s.category] += 1
        if s.full is not None:
            full[s.category] = full.get(s.category, 0)
    for s in storages.values():
        if s.category in full:
            full[s.category] += s.bytes if s.full is None else s.full
    tensor_bytes = sum(totals.values())
    allocated = _memprof.allocated_now()
    rows = _rows(storages.values())
    listed = rows[:TOP]
    return {
        "when": label,
        "allocated_bytes": allocated,
        "tensor_bytes": tensor_bytes,
        "gap_bytes": allocated - tensor_bytes,
        "categories": [
            {"category": c, "bytes": totals[c], "storages": counts[c], "unsharded_bytes": full.get(c)}
            for c in CATEGORIES
        ],
        "storages": len(storages),
        "unlisted_storages": sum(r["storages"] for r in rows[TOP:]),
        "skipped_objects": skipped,
        "tensors": listed,
    }
