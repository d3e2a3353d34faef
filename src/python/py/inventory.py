# memprof's tensor inventory (`memprof run --tensors`), run inside the profiled interpreter.
#
# At the end of a targeted call, or when an exception leaves one, it lists the live tensors on
# the profiled device, grouped by storage (views and tied weights count once), names them from
# the models and optimizers it finds (`layer1.0.conv1.weight`, `….grad`,
# `optimizer.state[layer1.0.conv1.weight].exp_avg`) or from the targeted frames' variables,
# and totals them by category against the allocator's allocated bytes. A sharded DTensor
# parameter (FSDP2, tensor parallelism) counts by its local shard, with its full size beside it.
# A walk of every object (gc.get_objects()) finds the models, the optimizers and every tensor;
# between walks, `Inventories` names from those and carries what the latest walk found while
# the allocator's live blocks say nothing it cannot name is new. It holds the objects it inspects
# only while it scans (weak references to the models and optimizers between scans), and an
# object that fails or vanishes while inspected is skipped.
import gc
import os
import sys
import weakref
from itertools import compress, islice

import _memprof

CATEGORIES = ("parameters", "buffers", "gradients", "optimizer_state", "other")
# A storage named in several ways takes the first category in this order.
_RANK = {c: i for i, c in enumerate(CATEGORIES)}
TOP = 40
# The items of a frame's container (dict, list, tuple) looked at for tensors to name.
CONTAINER_ITEMS = 100_000
# MEMPROF_TENSORS_WALK=always: every inventory walks all objects, as the first does (the tests
# compare the two ways).
ALWAYS_WALK = os.environ.get("MEMPROF_TENSORS_WALK") == "always"


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
    """The inventory now, by a walk of all the program's objects, as a dict for the report;
    `frames` are targeted frames whose local variables name the tensors they hold;
    `fallback_frames` name only what nothing else names."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    storages, skipped = _walk(torch, device_type, device_index, frames, fallback_frames)[:2]
    return _summary(list(storages.values()), skipped, label)


def _walk(torch, device_type, device_index, frames, fallback_frames=()):
    objects = gc.get_objects()
    try:
        return _collect(torch, objects, device_type, device_index, frames, fallback_frames)
    finally:
        objects.clear()
        del objects


class Inventories:
    """`--tensors`' inventory at the end of every targeted call, without a walk of every
    object each time (tens of milliseconds in a program that imported torch). A walk finds the
    models and optimizers and every tensor on the device; the inventories after it name the
    storages from those models and optimizers and the targeted frames only, and carry what the
    walk found for the rest, as long as the allocator's live blocks allow it: a block allocated
    since the previous inventory that none of them holds (a tensor kept somewhere else), or a
    storage the allocator never allocated (numpy's memory) that they no longer hold, and it
    walks again. So in a steady training loop the first call walks and the others read the
    allocator's blocks, the parameters, gradients and optimizer state, and the frames."""

    def __init__(self):
        # Address -> allocation serial of every live block at the previous inventory, and the
        # storages it found (address -> _Storage, read only: each inventory makes its own).
        self.blocks = None
        self.carried = {}
        # Storages of the previous inventory that are no allocator block.
        self.unallocated = set()
        # Weak references to the models' roots and the optimizers the latest walk found.
        self.roots = []
        self.optimizers = []

    def take(self, device_type, device_index, label, frames):
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        live = _memprof.live_blocks()
        # Without c10's use counts (torch before they were exposed) only a walk counts a
        # storage's tensors; without live blocks (none, or no tracker to list them) nothing
        # says what is new.
        walk = (self.blocks is None or ALWAYS_WALK or not live
                or not hasattr(torch._C, "_storage_Use_Count"))
        found = None if walk else self._named(
            torch, device_type, device_index, frames, live
        )
        if found is None:
            storages, skipped, roots, optimizers = _walk(torch, device_type, device_index, frames)
            self.roots = _weak(roots)
            self.optimizers = _weak(optimizers)
            del roots, optimizers
        else:
            storages, skipped = found
        self.blocks = dict(live)
        self.carried = storages
        self.unallocated = {ptr for ptr, st in storages.items() if ptr not in self.blocks and st.bytes}
        # Only the first and the latest call's inventories are kept: what can change later (the
        # allocator's total, where the unnamed blocks were made) is read now, the rest of the
        # table when the report is made (`finish`).
        allocated = _memprof.allocated_now()
        created = _created(storages.values())
        walked = found is None
        values = list(storages.values())
        return {"_finish": lambda: _summary(values, skipped, label, allocated, created, walked)}

    def _named(self, torch, device_type, device_index, frames, live):
        """The storages and the skipped count without a walk, or None where a walk is needed."""
        roots = [m for m in (r() for r in self.roots) if m is not None]
        optimizers = [o for o in (r() for r in self.optimizers) if o is not None]
        namer = _Namer(torch, device_type, device_index)
        namer.optimizers(optimizers, namer.models(roots))
        namer.frames(frames, ())
        del roots, optimizers
        storages, before, carried = namer.storages, self.blocks, self.carried
        if not self.unallocated.issubset(storages.keys()):
            return None
        for ptr, serial in live:
            if ptr in storages:
                continue
            if before.get(ptr) != serial:
                # A block new since the previous inventory that no name holds: a walk finds
                # what does.
                return None
            was = carried.get(ptr)
            if was is not None:
                # Its size and what the walk saw of it; its names and category anew.
                s = storages[ptr] = _Storage(ptr, was.bytes, was.shape, was.dtype)
                s.tensors, s.full = was.tensors, was.full
        return storages, namer.skipped


def _weak(objects):
    out = []
    for o in objects:
        try:
            out.append(weakref.ref(o))
        except TypeError:
            pass
    return out


def roles(torch, device_type, device_index):
    """[(storage data_ptr, category)] of every storage on the device that a tensor in memory
    holds: the category the models and optimizers name it by (parameters, buffers, gradients,
    optimizer_state), else "other" (held by a tensor the program can reach)."""
    storages = _walk(torch, device_type, device_index, ())[0]
    return [(s.ptr, s.category) for s in storages.values()]


class _Namer:
    """The storages on the device that tensors hold, and the names the models, optimizers and
    frames give them."""

    def __init__(self, torch, device_type, device_index):
        self.Tensor = torch.Tensor
        if device_type == "cpu":
            self.on_device = lambda t: t.is_cpu
        else:
            self.on_device = lambda t: t.is_cuda and t.get_device() == device_index
        # A DTensor is named by its local shard; torch.compile's fake tensors have no memory,
        # and reading their data pointer warns.
        self.dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
        self.fake = getattr(sys.modules.get("torch._subclasses.fake_tensor"), "FakeTensor", None)
        self.storages = {}
        # The number of references to a storage (c10's use count): one per tensor that views it,
        # the program's or autograd's, and one per storage object, such as the one read here.
        self.use_count = getattr(torch._C, "_storage_Use_Count", None)
        self.skipped = 0

    def storage_of(self, t):
        try:
            if self.fake is not None and issubclass(type(t), self.fake):
                return None
            if not self.on_device(t):
                return None
            st = t.untyped_storage()
            key = st.data_ptr()
            s = self.storages.get(key)
            if s is None:
                s = self.storages[key] = _Storage(
                    key, st.nbytes(), list(t.shape), str(t.dtype).replace("torch.", "")
                )
                if self.use_count is not None:
                    s.tensors = self.use_count(st._cdata) - 1
            return s
        except Exception:
            self.skipped += 1
            return None

    def sharded(self, t):
        """The local shard of a DTensor parameter or gradient, and its full size; (t, None) for
        a plain tensor."""
        local = getattr(t, "_local_tensor", None) if self.dtensor is not None else None
        if local is None:
            return t, None
        return local, t.numel() * t.element_size()

    def name_storage(self, t, name, category):
        local, full = self.sharded(t)
        s = self.storage_of(local)
        if s is not None:
            s.name(name, category)
            if full is not None:
                s.full = full

    def models(self, roots):
        """Names parameters, their gradients and buffers by the models (the modules that are no
        other module's child, prefixed by class when there are several); returns the names of
        the parameters by id, for the optimizers'."""
        param_names = {}
        for i, root in enumerate(roots):
            prefix = "" if len(roots) == 1 else f"{type(root).__name__}#{i + 1}."
            try:
                for name, p in root.named_parameters(remove_duplicate=False):
                    param_names.setdefault(id(p), prefix + name)
                    self.name_storage(p, prefix + name, "parameters")
                    g = p.grad
                    if g is not None:
                        self.name_storage(g, prefix + name + ".grad", "gradients")
                for name, b in root.named_buffers(remove_duplicate=False):
                    s = self.storage_of(b)
                    if s is not None:
                        s.name(prefix + name, "buffers")
            except Exception:
                self.skipped += 1
        return param_names

    def optimizers(self, optimizers, param_names):
        Tensor = self.Tensor
        for i, opt in enumerate(optimizers):
            oname = "optimizer" if len(optimizers) == 1 else f"optimizer#{i + 1}"
            try:
                for p, state in list(opt.state.items()):
                    pname = param_names.get(id(p), f"<param {list(p.shape)}>")
                    for k, v in list(state.items()):
                        if issubclass(type(v), Tensor):
                            self.name_storage(v, f"{oname}.state[{pname}].{k}", "optimizer_state")
            except Exception:
                self.skipped += 1

    def frames(self, frames, fallback_frames):
        Tensor = self.Tensor
        for fallback, group in ((False, frames), (True, fallback_frames)):
            for frame in group:
                try:
                    code = frame.f_code
                    qual = code.co_qualname if hasattr(code, "co_qualname") else code.co_name
                    for var, v in list(frame.f_locals.items()):
                        if issubclass(type(v), Tensor):
                            s = self.storage_of(self.sharded(v)[0])
                            if s is not None and s.category == "other" and not (fallback and s.names):
                                s.name(f"{qual}:{var}", "other")
                        elif type(v) in (dict, list, tuple):
                            # A cache or a history kept in a container: `cache[3]`, `losses[-1]`.
                            items = v.items() if type(v) is dict else enumerate(v)
                            for k, x in islice(list(items), CONTAINER_ITEMS):
                                if issubclass(type(x), Tensor):
                                    s = self.storage_of(self.sharded(x)[0])
                                    if s is not None and s.category == "other" and not s.names:
                                        s.name(f"{qual}:{var}[{k!r}]", "other")
                except Exception:
                    self.skipped += 1


def _find(torch, objects, namer):
    """Walks `objects` (all the program's): counts each storage's tensors on the device, and
    returns the models' root modules and the optimizers."""
    Tensor, Module = torch.Tensor, torch.nn.Module
    Optimizer = torch.optim.Optimizer
    modules, optimizers = [], []
    # The kind of each type is decided once, and the objects of the wanted types are picked out
    # by C loops (compress/map), since the program may hold millions of objects. type(), not
    # isinstance(): isinstance may read `__class__`, which runs arbitrary code (deprecation
    # warnings, proxies of dead objects). A DTensor is skipped here: gc finds its local shard.
    # Kinds after the shift: <= 0 skipped (DTensor, FakeTensor), 1 tensor, 2 module, 3 optimizer.
    bases = tuple(t for t in (namer.dtensor, namer.fake) if t is not None)
    shift = len(bases)
    kinds = _Kinds(*bases, Tensor, Module, Optimizer)
    for o in compress(objects, map(kinds.__getitem__, map(type, objects))):
        try:
            kind = kinds[type(o)] - shift
            if kind <= 0:
                continue
            if kind == 1:
                s = namer.storage_of(o)
                if s is not None and namer.use_count is None:
                    s.tensors += 1
            elif kind == 2:
                modules.append(o)
            else:
                optimizers.append(o)
        except Exception:
            namer.skipped += 1
    children = set()
    for m in modules:
        try:
            children.update(id(c) for c in m.children())
        except Exception:
            pass
    roots = [m for m in modules if id(m) not in children]
    return roots, optimizers


def _collect(torch, objects, device_type, device_index, frames, fallback_frames=()):
    """The storages on the device, named by the models, optimizers and frames that hold them;
    how many objects failed to be inspected; the root modules and the optimizers."""
    namer = _Namer(torch, device_type, device_index)
    roots, optimizers = _find(torch, objects, namer)
    namer.optimizers(optimizers, namer.models(roots))
    namer.frames(frames, fallback_frames)
    return namer.storages, namer.skipped, roots, optimizers


def _rows(storages, created_at):
    """The listed rows, largest first. Storages alike (the same category, shape, dtype and place
    of creation, and unnamed or items of one container) are one row with their count: a dict
    that keeps a tensor a step is `cache[…]`, 49 storages, not 49 rows."""
    groups = {}
    for s in storages:
        created = created_at.get(s.ptr)
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
    # Ties in a stable order, whichever way the storages were found.
    return sorted(groups.values(), key=lambda r: (-r["bytes"], _RANK[r["category"]], r["name"] or "",
                                                  r["created_at"] or ""))


def finish(inventory):
    """An inventory that `Inventories.take` deferred, as the report has it."""
    make = inventory.pop("_finish", None)
    if make is not None:
        inventory.update(make())
    return inventory


def _created(storages):
    """Storage address -> `file:line (function)` of the targeted line that allocated it, for
    the storages that are not model or optimizer state."""
    out = {}
    for s in storages:
        if s.category == "other":
            where = _memprof.created_at(s.ptr)
            if where is not None:
                qualname, filename, line = where
                out[s.ptr] = f"{filename}:{line} ({qualname})"
    return out


def _summary(storages, skipped, label, allocated=None, created=None, walked=None):
    """The inventory's totals and table; `storages` a list; the allocator's total and the
    places of creation read now unless given."""
    totals = {c: 0 for c in CATEGORIES}
    counts = {c: 0 for c in CATEGORIES}
    full = {}
    for s in storages:
        totals[s.category] += s.bytes
        counts[s.category] += 1
        if s.full is not None:
            full[s.category] = full.get(s.category, 0)
    for s in storages:
        if s.category in full:
            full[s.category] += s.bytes if s.full is None else s.full
    tensor_bytes = sum(totals.values())
    if allocated is None:
        allocated = _memprof.allocated_now()
    rows = _rows(storages, _created(storages) if created is None else created)
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
        **({} if walked is None else {"walked": walked}),
    }
