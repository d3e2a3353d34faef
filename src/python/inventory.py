# memprof's tensor inventory (`memprof run --tensors`), run inside the profiled interpreter.
#
# At the end of a targeted call, or when an exception leaves one, it lists the live tensors on
# the profiled device, grouped by storage (views and tied weights count once), names them from
# the models and optimizers it finds (`layer1.0.conv1.weight`, `….grad`,
# `optimizer.state[layer1.0.conv1.weight].exp_avg`) or from the targeted frames' variables,
# and totals them by category against the allocator's allocated bytes. It holds the objects it
# inspects only while it scans (the list from gc.get_objects() and nothing derived from it
# survives the call), and an object that fails or vanishes while inspected is skipped.
import gc
import sys
from itertools import compress

import _memprof

CATEGORIES = ("parameters", "buffers", "gradients", "optimizer_state", "other")
# A storage named in several ways takes the first category in this order.
_RANK = {c: i for i, c in enumerate(CATEGORIES)}
TOP = 40


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
    __slots__ = ("ptr", "bytes", "category", "names", "tensors", "shape", "dtype")

    def __init__(self, ptr, nbytes, shape, dtype):
        self.ptr = ptr
        self.bytes = nbytes
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


def take(device_type, device_index, label, frames):
    """The inventory now, as a dict for the report; `frames` are targeted frames whose local
    variables name the tensors they hold."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    objects = gc.get_objects()
    try:
        return _scan(torch, objects, device_type, device_index, label, frames)
    finally:
        objects.clear()
        del objects


def _scan(torch, objects, device_type, device_index, label, frames):
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

    modules, optimizers = [], []
    # The kind of each type is decided once, and the objects of the wanted types are picked out
    # by C loops (compress/map), since the program may hold millions of objects. type(), not
    # isinstance(): isinstance may read `__class__`, which runs arbitrary code (deprecation
    # warnings, proxies of dead objects).
    kinds = _Kinds(Tensor, Module, Optimizer)
    for o in compress(objects, map(kinds.__getitem__, map(type, objects))):
        try:
            kind = kinds[type(o)]
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
                s = storage_of(p)
                if s is not None:
                    s.name(prefix + name, "parameters")
                g = p.grad
                if g is not None:
                    gs = storage_of(g)
                    if gs is not None:
                        gs.name(prefix + name + ".grad", "gradients")
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
                        s = storage_of(v)
                        if s is not None:
                            s.name(f"{oname}.state[{pname}].{k}", "optimizer_state")
        except Exception:
            skipped += 1

    for frame in frames:
        try:
            qual = frame.f_code.co_qualname if hasattr(frame.f_code, "co_qualname") else frame.f_code.co_name
            for var, v in list(frame.f_locals.items()):
                if issubclass(type(v), Tensor):
                    s = storage_of(v)
                    if s is not None and s.category == "other":
                        s.name(f"{qual}:{var}", "other")
        except Exception:
            skipped += 1

    totals = {c: 0 for c in CATEGORIES}
    counts = {c: 0 for c in CATEGORIES}
    for s in storages.values():
        totals[s.category] += s.bytes
        counts[s.category] += 1
    tensor_bytes = sum(totals.values())
    allocated = _memprof.allocated_now()
    ranked = sorted(storages.values(), key=lambda s: -s.bytes)
    listed = []
    for s in ranked[:TOP]:
        created = None
        if s.category == "other":
            where = _memprof.created_at(s.ptr)
            if where is not None:
                qualname, filename, line = where
                created = f"{filename}:{line} ({qualname})"
        listed.append({
            "name": ", ".join(s.names) if s.names else None,
            "category": s.category,
            "bytes": s.bytes,
            "shape": s.shape,
            "dtype": s.dtype,
            "tensors": s.tensors,
            "created_at": created,
        })
    return {
        "when": label,
        "allocated_bytes": allocated,
        "tensor_bytes": tensor_bytes,
        "gap_bytes": allocated - tensor_bytes,
        "categories": [
            {"category": c, "bytes": totals[c], "storages": counts[c]} for c in CATEGORIES
        ],
        "storages": len(storages),
        "unlisted_storages": max(0, len(ranked) - TOP),
        "skipped_objects": skipped,
        "tensors": listed,
    }
