# memprof's view of the modules inside a torch.compile'd model (`memprof run --modules`), run
# inside the profiled interpreter. The module hooks see a compiled model as one call; its
# submodules live on only in the FX nodes' `nn_module_stack`. For each graph dynamo hands to
# inductor (`compile_fx`: every process, a fresh compile and a warm cache alike) this reads which
# module each FX node came from; for each generated file inductor loads, which of its lines
# allocate for which node (the "Source Nodes" inductor writes above each kernel, else the line's
# stack trace in torch's line map, else its neighbours), so each line gets a tag that names a
# module and phase. The native tracker sums the bytes allocated at each tag; the wrapper's `call`
# counts its runs and, for a forward graph, measures what it returns for backward (AOTAutograd's
# saved tensors, `tensors_saved_for_backwards_slice`) by the module whose node produced each.
# Nothing of the compile changes: no config, no graph pass; `call` keeps its arguments and results.
import re
import sys
import threading
import weakref

import _memprof

_SOURCE_NODES = re.compile(r"#\s*(?:Topologically Sorted )?Source Nodes: \[([^\]]*)\]")
_ASSIGN = re.compile(r"(buf\d+)\s*=\s*(.*)")
_ALLOC = re.compile(r"(empty_strided\w*|alloc_from_pool|torch\.empty\w*)\(")
_REUSE = re.compile(r"(buf\d+)\s*;\s*del\s+buf\d+\s*#\s*reuse")
_LOCAL = re.compile(r"L\['([^']+)'\]")
_PARAMETER = re.compile(r"_(parameters|buffers)_")
# `File "/path/model.py", line 42, ` in a stack trace's frame lines.
_TRACE_PLACE = re.compile(r'File "[^"]*", line \d+, ')
# Statements that neither allocate nor run a kernel of their own.
_QUIET = ("del ", "assert_", "args.clear", "stream", "with ", "return", "pass", "torch.cuda.set_device")

_installed = False
_local = threading.local()
# Tag (index) -> (graph, phase, module path); tag 0 is none.
_tags = [None]
_tag_of = {}
_graphs = []
# id(bw_module) of a graph whose backward compiles at its first use -> (graph, bw_module ref).
_lazy = {}
_patched = []


class _Graph:
    """One graph dynamo handed to inductor: its nodes' modules, the wrappers inductor loaded for
    it, and what they did."""

    def __init__(self, gm):
        self.root = None
        self.names = {}  # node name -> module path ("" for the root)
        self.types = {"": None}
        self.depths = {"": 0}
        self.order = []  # module paths in forward order
        self.traces = {}  # _trace_key(stack trace) -> module paths of its nodes
        self.placeholders = []  # (is a parameter or buffer, module of its first user)
        self.input_bytes = {}
        self.saved_slice = None
        self.calls = {"forward": 0, "backward": 0}
        self.saved = {}  # module path -> bytes saved, summed over calls
        self.saved_last = {}  # module path -> bytes saved by the last call
        self.outputs = {}  # position in the forward's return -> module path (None: parameter)
        self.function = None  # the compiled function's qualified name, from a stack trace
        self.root_class = None  # the class of the object the module paths start from
        inside = {}
        for node in gm.graph.nodes:
            # A parameter's placeholder names its module too: not yet in the forward order.
            path = self._path_of(node, place=node.op != "placeholder")
            self.names[node.name] = path
            if path is not None:
                inside[node] = path
                trace = node.meta.get("stack_trace")
                if trace:
                    if self.function is None:
                        self.function = _outermost_function(trace)
                    paths = self.traces.setdefault(_trace_key(trace), [])
                    if path not in paths:
                        paths.append(path)
        for node in gm.graph.nodes:
            if node.op != "placeholder":
                continue
            users = [inside[u] for u in node.users if u in inside]
            self.placeholders.append(
                (bool(_PARAMETER.search(node.name)), users[0] if users else ""))
        # What each module takes in from outside it (what checkpointing keeps), parameters aside.
        counted = set()
        for node, path in inside.items():
            for arg in node.all_input_nodes:
                if arg.op == "placeholder" and _PARAMETER.search(arg.name):
                    continue
                source = inside.get(arg, "")
                for module in _ancestors(path):
                    if not _within(source, module):
                        key = (module, arg)
                        if key not in counted:
                            counted.add(key)
                            self.input_bytes[module] = (self.input_bytes.get(module, 0)
                                                        + _value_bytes(arg))

    def root_label(self):
        """The compiled model as the rows name it: its class (`GPT`, from `GPT.forward`), or the
        name the compiled function calls it by."""
        if self.root_class:
            return self.root_class
        function = self.function or ""
        if "." in function and (self.root == "self" or function.endswith(".forward")):
            return function.rsplit(".", 1)[0].split(".<locals>.")[-1]
        return self.root or "compiled"

    def _path_of(self, node, place=True):
        stack = node.meta.get("nn_module_stack")
        if not stack:
            return None
        path = None
        depth = 0
        for written, kind in stack.values():
            path = _module_path(written)
            if path is None:
                return None
            local = _LOCAL.match(written).group(1)
            if self.root is None:
                self.root = local
            if not path:  # the compiled model itself (a container's own forward)
                continue
            depth += 1
            if place and path not in self.types:
                self.types[path] = getattr(kind, "__name__", str(kind))
                self.depths[path] = depth
                _place_in(self.order, path)
        return path


def _place_in(order, path):
    """Puts `path` into the forward order: after its parent's last descendant so far (a module
    that only backward's nodes name comes under its parent, not at the end)."""
    parent = path.rsplit(".", 1)[0] if "." in path else ""
    at = len(order)
    if parent:
        inside = [i for i, p in enumerate(order) if p == parent or p.startswith(parent + ".")]
        if inside:
            at = inside[-1] + 1
    order.insert(at, path)


def _root_class(local):
    """The class of the object named `local` in the frame dynamo is compiling (the model whose
    submodules the paths name; a compiled model's own class, not OptimizedModule)."""
    if not local:
        return None
    frame = sys._getframe(2)
    for _ in range(150):
        if frame is None:
            return None
        if "frame" in frame.f_code.co_varnames:
            compiling = frame.f_locals.get("frame")
            values = getattr(compiling, "f_locals", None)
            if isinstance(values, dict) and local in values:
                obj = values[local]
                obj = getattr(obj, "_orig_mod", obj)
                return type(obj).__name__
        frame = frame.f_back
    return None


def _outermost_function(trace):
    import _memprof_compiled

    frames = _memprof_compiled._FRAME.findall(trace)
    if not frames:
        return None
    file, line, name, _ = frames[0]
    return _memprof_compiled._qualname(file, int(line), name)


def _module_path(written):
    """`L['self'].transformer.h[0]` -> `transformer.h.0`; None for another form."""
    m = _LOCAL.match(written)
    if m is None:
        return None
    rest = written[m.end():]
    rest = re.sub(r"\[(\d+)\]", r".\1", rest)
    rest = re.sub(r"\['([^']+)'\]", r".\1", rest)
    return rest.replace("._modules.", ".").lstrip(".")


def _ancestors(path):
    parts = path.split(".") if path else []
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _holders(path):
    """`path` and every module holding it, the model itself ("") last."""
    return _ancestors(path) + [""]


def _within(path, module):
    return path == module or path.startswith(module + ".")


def _common(paths):
    """The innermost module that holds all of `paths`."""
    paths = [p.split(".") if p else [] for p in paths]
    out = []
    for parts in zip(*paths):
        if any(p != parts[0] for p in parts):
            break
        out.append(parts[0])
    return ".".join(out)


def _value_bytes(node):
    value = node.meta.get("example_value", node.meta.get("val"))
    try:
        return int(value.numel()) * value.element_size()
    except Exception:
        return 0


def install():
    global _installed
    _installed = True
    import _memprof_imports

    _memprof_imports.after_import("torch._inductor.compile_fx", _wrap_compile_fx)
    _memprof_imports.after_import("torch._functorch._aot_autograd.runtime_wrappers",
                                  _wrap_post_compile)


def installed():
    return _installed


def stop():
    while _patched:
        owner, name, original = _patched.pop()
        setattr(owner, name, original)


def _wrap_compile_fx(module):
    original = getattr(module, "compile_fx", None)
    if original is None:
        return

    def compile_fx(model_, *args, **kwargs):
        if getattr(_local, "graph", None) is not None or not hasattr(model_, "graph"):
            return original(model_, *args, **kwargs)
        try:
            graph = _Graph(model_)
            graph.root_class = _root_class(graph.root)
        except Exception:
            graph = None
        _local.graph = graph
        try:
            return original(model_, *args, **kwargs)
        finally:
            _local.graph = None

    compile_fx.__wrapped__ = original
    module.compile_fx = compile_fx
    _patched.append((module, "compile_fx", original))


def _wrap_post_compile(module):
    owner = getattr(module, "AOTDispatchAutograd", None)
    original = owner.__dict__.get("post_compile") if owner is not None else None
    if not isinstance(original, staticmethod):
        return
    post_compile = original.__func__

    def wrapped(*args, **kwargs):
        try:
            _note_aot(args, kwargs)
        except Exception:
            pass
        return post_compile(*args, **kwargs)

    owner.post_compile = staticmethod(wrapped)
    _patched.append((owner, "post_compile", original))


def _note_aot(args, kwargs):
    """AOTAutograd's forward and backward of the graph compiling now: which of the forward's
    results it saves for backward, and the backward graph if it compiles later."""
    graph = getattr(_local, "graph", None)
    if graph is None:
        return
    spec = args[0] if len(args) == 1 and hasattr(args[0], "fw_metadata") else None
    if spec is not None:  # torch 2.14+: one AOTDispatchAutogradCompileSpec
        meta, lazy = spec.fw_metadata, spec.lazy_backward_info
    else:  # torch 2.9 to 2.13: keyword arguments, the lazy info eighth
        meta = kwargs.get("fw_metadata")
        lazy = kwargs.get("lazy_backward_info", args[7] if len(args) > 7 else None)
    graph.saved_slice = getattr(meta, "tensors_saved_for_backwards_slice", None)
    bw_module = getattr(lazy, "bw_module", None)
    if bw_module is not None:
        _lazy[id(bw_module)] = (graph, weakref.ref(bw_module))


def _graph_loading():
    """The graph whose code inductor is loading: the one compiling now, or the one whose
    backward compiles at its first use (the frame that compiles it holds the FX graph as
    `bw_module`: `_backward_impl` through torch 2.13, the lazy compiler's `get_or_compile` since)."""
    graph = getattr(_local, "graph", None)
    if graph is not None:
        return graph
    frame = sys._getframe(1)
    for _ in range(40):
        if frame is None:
            break
        compiling = frame.f_code.co_name in ("_backward_impl", "get_or_compile")
        bw_module = frame.f_locals.get("bw_module") if compiling else None
        if bw_module is not None:
            found = _lazy.get(id(bw_module))
            if found is not None and found[1]() is bw_module:
                return found[0]
        frame = frame.f_back
    return None


def on_load(path, module, starts, traces):
    """A wrapper inductor loaded: its lines' tags ((first line, tag)); its `call` counted."""
    graph = _graph_loading()
    if graph is None or not callable(getattr(module, "call", None)):
        return []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    phase = _phase(lines)
    # Names from dynamo's graph alone, also for a backward compiled now (whose FX graph is
    # here): a warm cache has no FX graphs, and a report must not depend on the cache's state.
    names = graph.names
    # The kernels of `call` and, for a graph split for CUDA graphs, of its partitions (which
    # name their buffers as `call` does).
    regions, returned, ends = [], None, []
    for start, is_call in _functions(lines):
        found, end, result = _regions(lines, start)
        regions.extend(found)
        ends.extend([end] * len(found))
        if is_call:
            returned = result
    if not regions:
        return []
    trace_at = _trace_lookup(starts, traces)
    modules = []
    for first, kernel, names_ in regions:
        found = [names.get(n) for n in names_]
        found = [p for p in found if p is not None]
        modules.append(_common(found) if found else graph.traces.get(_trace_key(trace_at(kernel))))
    _fill_unresolved(modules)
    tags = []
    defined = {}
    for i, ((first, kernel, _), module_path) in enumerate(zip(regions, modules)):
        tags.append((first, _tag(graph, phase, module_path)))
        # To the next kernel of the same function, else to the function's end.
        last = regions[i + 1][0] if i + 1 < len(regions) and ends[i + 1] == ends[i] else ends[i]
        if last == ends[i]:
            tags.append((ends[i], 0))
        for line in range(first, last):
            m = _ASSIGN.match(lines[line - 1].strip())
            if m and m.group(1) not in defined:
                defined[m.group(1)] = module_path
    if phase == "forward" and returned is not None:
        for i, item in enumerate(returned):
            base = re.match(r"(?:reinterpret_tensor\()?(\w+)", item)
            name = base.group(1) if base else ""
            if name in defined:
                graph.outputs[i] = defined[name]
            elif name.startswith("primals_"):
                k = int(name[len("primals_"):]) - 1
                if 0 <= k < len(graph.placeholders):
                    is_parameter, user = graph.placeholders[k]
                    graph.outputs[i] = None if is_parameter else user
    _count_calls(module, graph, phase)
    if graph not in _graphs:
        _graphs.append(graph)
    return tags


def _phase(lines):
    for line in lines[:3]:
        if "AOT ID" in line:
            if "backward" in line:
                return "backward"
            return "forward"
    return "forward"


def _functions(lines):
    """(index of the `def` line, whether it is `call`) of the generated functions that run
    kernels: `call`, and the partitions of a graph split for CUDA graphs."""
    for i, text in enumerate(lines):
        if re.match(r"\s*def call\((self, )?args\):", text):
            yield i, True
        elif re.match(r"\s*def partition_\d+\(args\):", text):
            yield i, False


def _regions(lines, start):
    """The kernels of the function whose `def` is at `start`: (first line, kernel statement's
    line, source node names); the function's end line; the items of its return."""
    indent = len(lines[start]) - len(lines[start].lstrip()) + 1
    regions = []
    pending_first = None
    pending_names = []
    returned = None
    end = len(lines) + 1
    for i in range(start + 1, len(lines)):
        text = lines[i]
        stripped = text.strip()
        if stripped and len(text) - len(text.lstrip()) < indent:
            end = i + 1
            break
        if not stripped:
            continue
        number = i + 1
        nodes = _SOURCE_NODES.search(stripped)
        if nodes:
            pending_names = [n.strip() for n in nodes.group(1).split(",") if n.strip()]
            if pending_first is None:
                pending_first = number
            continue
        if stripped.startswith("#"):
            continue
        if stripped.startswith("return"):
            returned = _items(stripped[len("return"):].strip())
            continue
        assign = _ASSIGN.match(stripped)
        if assign and (_ALLOC.match(assign.group(2)) or _REUSE.match(assign.group(2))):
            if pending_first is None:
                pending_first = number
            continue
        if stripped.startswith(_QUIET) or re.match(r"buf\d+\s*=\s*buf\d+\[\d+\]", stripped):
            continue
        if re.match(r"\w+\s*=\s*\w+\s*$", stripped) or stripped.endswith("= args"):
            continue
        regions.append((pending_first or number, number, pending_names))
        pending_first, pending_names = None, []
    return regions, end, returned


def _items(text):
    """The top-level items of a tuple or list expression."""
    text = text.strip()
    if text[:1] in "([" and text[-1:] in ")]":
        text = text[1:-1]
    items, depth, current = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        items.append("".join(current).strip())
    return items


def _trace_key(trace):
    """A stack trace without its files and line numbers: the trace a warm cache's line map holds
    is the one of the compile that wrote the entry, from another checkout or before an edit
    that moved the lines; its functions and source lines still match this process's nodes."""
    return _TRACE_PLACE.sub("", trace) if trace else trace


def _trace_lookup(starts, traces):
    import bisect

    def at(line):
        i = bisect.bisect_right(starts, line) - 1
        return traces[i] if 0 <= i < len(traces) else None

    return at


def _fill_unresolved(modules):
    """A kernel without a node of its own module (one inductor wrote no source nodes for, or one
    of backward's own nodes) is in the module of its neighbours: of the modules its line's stack
    trace names (a list), the one sharing the most of its path with the kernel before it (else
    after it), else the module holding both."""
    resolved = [m if isinstance(m, str) else None for m in modules]
    for i, m in enumerate(modules):
        if isinstance(m, str):
            continue
        before = next((resolved[j] for j in range(i - 1, -1, -1) if resolved[j] is not None), None)
        after = next((resolved[j] for j in range(i + 1, len(resolved)) if resolved[j] is not None), None)
        near = [p for p in (before, after) if p is not None]
        if m:  # candidates from the stack trace

            def closeness(c):
                return tuple(_shared_parts(c, p) if p is not None else -1 for p in (before, after))

            modules[i] = max(m, key=closeness)
        else:
            modules[i] = _common(near) if near else ""


def _shared_parts(a, b):
    common = _common([a, b])
    return len(common.split(".")) if common else 0


def _tag(graph, phase, path):
    key = (id(graph), phase, path)
    tag = _tag_of.get(key)
    if tag is None:
        tag = _tag_of[key] = len(_tags)
        _tags.append((graph, phase, path))
    return tag


def _count_calls(module, graph, phase):
    original = module.call
    torch = sys.modules["torch"]
    tensor = torch.Tensor

    def call(args):
        graph.calls[phase] += 1
        out = original(args)
        if phase == "forward" and graph.saved_slice is not None:
            try:
                _measure_saved(graph, out, tensor)
            except Exception:
                pass
        return out

    call.__wrapped__ = original
    module.call = call


def _measure_saved(graph, out, tensor):
    seen = set()
    last = {}
    s = graph.saved_slice
    for i in range(*s.indices(len(out))):
        t = out[i]
        path = graph.outputs.get(i, "")
        if path is None or not isinstance(t, tensor):
            continue
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        last[path] = last.get(path, 0) + storage.nbytes()
    graph.saved_last = last
    for path, n in last.items():
        graph.saved[path] = graph.saved.get(path, 0) + n


def report():
    """The compiled modules' rows and, for the graph that saved the most, its forward chain
    for --suggest-checkpoints."""
    if len(_tags) == 1:
        return [], None
    allocated = {}
    pooled = False
    for tag, count, nbytes, in_pool in _memprof.compiled_tag_totals():
        if 0 < tag < len(_tags):
            graph, phase, path = _tags[tag]
            pooled = pooled or in_pool > 0
            for module in _holders(path):
                a = allocated.setdefault((id(graph), phase, module), [0, 0, 0])
                a[0] += count
                a[1] += nbytes
                a[2] += in_pool
    rows = {}
    best = None
    for graph in _graphs:
        if not graph.order:  # a function with no module in it: its lines tell all
            continue
        root = graph.root_label()
        inclusive = _inclusive(graph.saved)
        last = _inclusive(graph.saved_last)
        for phase in ("forward", "backward"):
            if not graph.calls[phase]:
                continue
            for path in [""] + graph.order:
                key = (root, path, phase)
                a = allocated.get((id(graph), phase, path), [0, 0, 0])
                row = rows.get(key)
                if row is None:
                    row = rows[key] = {
                        "root": root, "module": path, "type": graph.types.get(path) or root,
                        "depth": graph.depths.get(path, 0), "phase": phase, "calls": 0,
                        "allocations": 0, "allocated_bytes": 0,
                    }
                    if phase == "forward":
                        row["saved_bytes"] = 0
                row["calls"] += graph.calls[phase]
                row["allocations"] += a[0]
                row["allocated_bytes"] += a[1]
                if pooled:  # CUDA graphs ran: what went to their pools
                    row["pool_bytes"] = row.get("pool_bytes", 0) + a[2]
                if phase == "forward":
                    row["saved_bytes"] += inclusive.get(path, 0)
        total = last.get("", 0)
        if best is None or total > best[0]:
            calls = [{"module": "", "depth": 0, "saved_bytes": total, "input_bytes": 0,
                      "leaf": False}]
            for path in graph.order:
                calls.append({
                    "module": path, "depth": graph.depths.get(path, 0),
                    "saved_bytes": last.get(path, 0),
                    "input_bytes": graph.input_bytes.get(path, 0),
                    # Not split further: a module with no submodules, or one that saves
                    # bytes of its own (a block's residual stream, a fused activation).
                    "leaf": graph.saved_last.get(path, 0) > 0
                    or not any(o.startswith(path + ".") for o in graph.order),
                })
            best = (total, {"root": root, "calls": calls})
    order = sorted(rows.values(), key=lambda r: r["phase"] != "forward")
    return order, (best[1] if best else None)


def _inclusive(by_module):
    out = {}
    for path, n in by_module.items():
        for module in _holders(path):
            out[module] = out.get(module, 0) + n
    return out
