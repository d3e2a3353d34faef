# memprof's module tracker (`memprof run --modules`), run inside the profiled interpreter.
#
# Every torch.nn.Module call, forward and backward, becomes a measurement scope in Rust
# (`_memprof.scope_open` / `scope_close`: allocated bytes at start and end, exact peak while
# open). Forward calls are seen through torch's global module hooks; a call's backward starts
# when the gradient of one of its outputs is ready and ends when those of all its inputs are
# (plain tensor hooks, which wrap nothing and return nothing), or when the backward pass ends.
# Bytes saved for backward are counted by a saved-tensors pack hook pushed only while a root
# module's forward runs and the program has no such hook of its own. Nothing here keeps a tensor
# alive beyond what autograd itself keeps. Sharded (DTensor) parameters count by their local
# shard, with their full size beside it. With --warmup/--calls, only the scheduled root calls
# (or the module calls inside the targets' measured calls) are measured.
import sys
import threading
import weakref

import _memprof

TIMELINE_CAP = 20000
_tracker = None


class _Call:
    """One open forward call of a module."""

    __slots__ = ("entry", "scope", "saved", "input_bytes", "backward", "children", "pass_",
                 "module_id", "slot", "index")

    def __init__(self, entry, scope, input_bytes, pass_):
        self.entry = entry
        self.scope = scope
        self.saved = 0
        self.input_bytes = input_bytes
        self.backward = _Backward(entry)
        self.children = 0
        self.pass_ = pass_


class _Backward:
    """The backward of one forward call: opened by the first of its outputs' gradients, closed
    when the gradients of all its inputs have arrived (or when the backward pass ends)."""

    __slots__ = ("entry", "scope", "slot", "inputs", "pending")

    def __init__(self, entry):
        self.entry = entry
        self.scope = 0
        self.slot = None
        self.inputs = 0
        self.pending = 0

    # Tensor hooks: they return None, so the gradients pass unchanged.
    def output_ready(self, grad):
        _tracker.backward_start(self)

    def input_ready(self, grad):
        self.pending -= 1
        if self.pending <= 0:
            _tracker.backward_end(self)


class _Pass:
    """One forward pass of a root module: what it saved for backward, and its calls in order."""

    __slots__ = ("root", "saved_storages", "state_storages", "calls", "pushed")

    def __init__(self, root, state_storages):
        self.root = root
        self.saved_storages = set()
        self.state_storages = state_storages
        # (name, depth, saved bytes, input bytes, has children) per finished call, by start.
        self.calls = []
        self.pushed = False


def _storage_key_bytes(t):
    st = t.untyped_storage()
    return st.data_ptr(), st.nbytes()


class Tracker:
    def __init__(self, device_type, device_index, plan, schedule=None, follow_targets=False):
        # Only checkpoint suggestions need the bytes of each call's inputs.
        self.plan = plan
        self.device_type = device_type
        self.device_index = device_index
        self.local = threading.local()
        # (root label, module name, phase) -> aggregate dict, in first-seen order; and the module
        # of each forward entry, to count its parameters again when the run ends.
        self.entries = {}
        self.entry_modules = {}
        self.timeline = []
        self.timeline_dropped = 0
        self.root_labels = weakref.WeakKeyDictionary()
        self.root_label_count = {}
        self.names = weakref.WeakKeyDictionary()  # root -> WeakKeyDictionary(module -> name)
        # Submodule -> (its root, its name): a submodule called with no module running (activation
        # checkpointing recomputing it during backward) keeps its name.
        self.known = weakref.WeakKeyDictionary()
        self.open_backward = {}
        self.callback_queued = False
        self.best_chain = None
        self.best_saved = -1
        self.torch = None
        # Root forward passes that ran under the program's own saved-tensors hooks.
        self.unmeasured_passes = 0
        # Hooks on leaf tensors (which outlive a graph): removed when a backward pass ends.
        self.leaf_hooks = []
        # --warmup/--calls: (warmup, calls) counted per root module here, or follow the targets'
        # measured calls (follow_targets); forward calls of each root label so far.
        self.schedule = schedule
        self.follow_targets = follow_targets
        self.root_calls = {}
        self.roots_done = set()
        self.finish_pending = False
        self.handles = []
        # (id of the latest exception seen leaving a forward call, the calls running then).
        self.exception_active = (None, [])

    # --- naming -------------------------------------------------------------------------

    def _root_label(self, root):
        label = self.root_labels.get(root)
        if label is None:
            base = type(root).__name__
            n = self.root_label_count.get(base, 0) + 1
            self.root_label_count[base] = n
            label = base if n == 1 else f"{base}#{n}"
            self.root_labels[root] = label
        return label

    def _name_in(self, root, module, parent_name):
        names = self.names.get(root)
        if names is None:
            names = weakref.WeakKeyDictionary()
            for name, m in root.named_modules(remove_duplicate=True):
                if m not in names:
                    names[m] = name
            self.names[root] = names
        name = names.get(module)
        if name is not None and module is not root:
            self.known[module] = (weakref.ref(root), name)
        if name is None:
            # Called inside the root but not one of its submodules (a module built on the fly).
            own = f"({type(module).__name__})"
            name = f"{parent_name}.{own}" if parent_name else own
        return name

    def _entry(self, label, name, phase, module):
        key = (label, name, phase)
        entry = self.entries.get(key)
        if entry is None:
            depth = 0 if name == "" else name.count(".") + 1
            local, unsharded = self._parameter_bytes(module)
            entry = {
                "root": label,
                "module": name,
                "type": type(module).__name__,
                "depth": depth,
                "phase": phase,
                "calls": 0,
                "delta_bytes": 0,
                "peak_bytes": None,
                "peak_increase_bytes": None,
                "saved_bytes": 0 if phase == "forward" else None,
                "parameter_bytes": local,
                "unsharded_parameter_bytes": unsharded,
                "collectives": {},
            }
            self.entries[key] = entry
            self.entry_modules[key] = weakref.ref(module)
        return entry

    def _on_device(self, t):
        # is_cpu / is_cuda and get_device() are cheaper than building t.device.
        if self.device_index is None:
            return t.is_cpu
        return t.is_cuda and t.get_device() == self.device_index

    def _parameter_bytes(self, module):
        """(bytes on this device, full size when some parameters are sharded DTensors, else
        None). A DTensor (FSDP2's fully_shard, tensor parallelism) holds only its local shard
        here: that shard counts, and the full size is numel x element size of the whole."""
        seen = set()
        total = 0
        unsharded = 0
        sharded = False
        try:
            for p in module.parameters():
                local = getattr(p, "_local_tensor", None)
                if local is not None:
                    sharded = True
                    if self._on_device(local):
                        key = (local.data_ptr(), local.storage_offset())
                        if key not in seen:
                            seen.add(key)
                            total += local.numel() * local.element_size()
                            unsharded += p.numel() * p.element_size()
                elif self._on_device(p):
                    ptr, n = _storage_key_bytes(p)
                    if ptr not in seen:
                        seen.add(ptr)
                        total += n
                        unsharded += n
        except Exception:
            pass
        return total, (unsharded if sharded else None)

    def _tensor_bytes(self, values, seen):
        total = 0
        for v in values:
            if isinstance(v, self.torch.Tensor) and self._on_device(v):
                try:
                    ptr, n = _storage_key_bytes(v)
                except Exception:
                    continue
                if ptr not in seen:
                    seen.add(ptr)
                    total += n
        return total

    # --- scopes -------------------------------------------------------------------------

    def _record(self, entry, reading, saved=None):
        if reading is None:
            return None
        start, end, peak, collectives = reading
        if collectives:
            sums = entry["collectives"]
            for kind, n in zip(_memprof.COLLECTIVE_KINDS, collectives):
                if n:
                    sums[kind] = sums.get(kind, 0) + n
        entry["calls"] += 1
        entry["delta_bytes"] += end - start
        if entry["peak_bytes"] is None or peak > entry["peak_bytes"]:
            entry["peak_bytes"] = peak
        inc = peak - start
        if entry["peak_increase_bytes"] is None or inc > entry["peak_increase_bytes"]:
            entry["peak_increase_bytes"] = inc
        if saved is not None:
            entry["saved_bytes"] += saved
        return start, end, peak

    def _timeline_slot(self, entry):
        if len(self.timeline) >= TIMELINE_CAP:
            self.timeline_dropped += 1
            return None
        item = {"root": entry["root"], "module": entry["module"], "phase": entry["phase"]}
        self.timeline.append(item)
        return item

    @staticmethod
    def _fill(item, reading, saved=None):
        if item is None or reading is None:
            return
        item["start_bytes"], item["end_bytes"], item["peak_bytes"] = reading[:3]
        if saved is not None:
            item["saved_bytes"] = saved

    # --- forward ------------------------------------------------------------------------

    def forward_pre(self, module, args):
        torch = self.torch
        if torch is None:
            torch = self.torch = sys.modules["torch"]
            self._lend_hooks_to_disablers(torch._C._autograd)
        # Inside a graph that torch.compile traces, the hooks do nothing: dynamo folds this test
        # to True and leaves them out of the graph (tracing them would fail or break the graph).
        # The compiled module's own call, which runs eagerly, is measured.
        if torch.compiler.is_compiling():
            return
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
        if not stack:
            # Module calls inside a root call that the schedule skips are not measured.
            skip = getattr(self.local, "skip", None)
            if skip:
                skip.append(id(module))
                return
            if not self._measures(module):
                self.local.skip = [id(module)]
                return
        grad = torch.is_grad_enabled()
        if stack:
            parent = stack[-1]
            parent.children += 1
            pass_ = parent.pass_
            name = self._name_in(pass_.root, module, parent.entry["module"])
        elif module in self.known and self.known[module][0]() is not None:
            root_ref, name = self.known[module]
            pass_ = _Pass(root_ref(), set())
        else:
            state = set()
            for t in list(module.parameters()) + list(module.buffers()):
                try:
                    state.add(t.untyped_storage().data_ptr())
                except Exception:
                    pass
            pass_ = _Pass(module, state)
            name = ""
            # Not around a compiled module (dynamo would inline the hook into its graphs), and
            # not over the program's own saved-tensors hooks (activation checkpointing,
            # save_on_cpu): on top of them, memprof's would take their place.
            if grad and not hasattr(module, "_orig_mod"):
                if torch._C._autograd._top_saved_tensors_default_hooks(False) is None:
                    torch._C._autograd._push_saved_tensors_default_hooks(self.pack, self.unpack)
                    pass_.pushed = True
                else:
                    self.unmeasured_passes += 1
        # The scope opens first: a root call's scope follows the program to the CUDA device it
        # uses now, and the entry's parameter bytes are counted on that device.
        scope = _memprof.scope_open()
        if not stack and self.device_type == "cuda":
            self.device_index = _memprof.measured_device()
        entry = self._entry(self._root_label(pass_.root), name, "forward", module)
        input_bytes = self._tensor_bytes(args, set()) if self.plan else 0
        slot = self._timeline_slot(entry)
        call = _Call(entry, scope, input_bytes, pass_)
        call.module_id = id(module)
        call.slot = slot
        call.index = len(pass_.calls)
        pass_.calls.append(None)
        stack.append(call)
        _history_context(entry, "forward")
        if grad:
            backward = call.backward
            for a in args:
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    self._hook(a, backward.input_ready)
                    backward.inputs += 1

    def forward_post(self, module, args, output):
        torch = self.torch
        if torch is None or torch.compiler.is_compiling():
            return
        if output is None:
            # Also how an exception leaving forward reaches this hook (always_call): the first
            # module it leaves tells which calls were running when it was raised.
            exc = sys.exc_info()[1]
            if exc is not None and id(exc) != self.exception_active[0]:
                self.exception_active = (id(exc), self.active())
        skip = getattr(self.local, "skip", None)
        if skip:
            # The top is this module's, unless an exception skipped inner post-hooks.
            while skip and skip.pop() != id(module):
                pass
            return
        stack = getattr(self.local, "stack", None)
        if not stack or not any(c.module_id == id(module) for c in stack):
            return
        # The top call is this module's, unless an exception skipped inner post-hooks.
        while True:
            call = stack.pop()
            self._end_call(call, stack)
            if call.module_id == id(module):
                break
        torch = self.torch
        hooked = False
        if output is not None and torch.is_grad_enabled():
            ready = call.backward.output_ready
            for t in _tensors_in(output, torch):
                if t.requires_grad:
                    self._hook(t, ready)
                    hooked = True
        if self.finish_pending and not stack and not hooked:
            # The last scheduled root call, with no backward to wait for: stop now; else when
            # its backward pass ends (or when the next root call starts).
            self._finish()

    def _hook(self, tensor, fn):
        """A hook on a tensor's gradient (plain tensor hooks: no wrapping, no graph change)."""
        try:
            handle = tensor.register_hook(fn)
        except Exception:
            return
        if tensor.grad_fn is None:
            self.leaf_hooks.append(handle)
            if len(self.leaf_hooks) > 10000:  # forward passes with no backward
                for h in self.leaf_hooks[:5000]:
                    h.remove()
                del self.leaf_hooks[:5000]

    def _end_call(self, call, stack):
        reading = _memprof.scope_close(call.scope)
        _history_context(stack[-1].entry if stack else None, "forward")
        saved = call.saved
        if stack:
            stack[-1].saved += saved
        e = call.entry
        self._record(e, reading, saved)
        self._fill(call.slot, reading, saved)
        pass_ = call.pass_
        pass_.calls[call.index] = (e["module"], e["depth"], saved, call.input_bytes, call.children)
        if stack:
            return
        if pass_.pushed:
            self.torch._C._autograd._pop_saved_tensors_default_hooks()
            pass_.pushed = False
        # The pass that saved the most is the one checkpoint suggestions are planned on.
        if e["module"] == "" and saved > self.best_saved:
            self.best_saved = saved
            self.best_chain = (e["root"], pass_.calls)

    # --- schedule (--warmup/--calls) ----------------------------------------------------

    def _measures(self, module):
        """Whether a root call starting now is measured."""
        if self.finish_pending:
            self._finish()
            return False
        if self.follow_targets:
            return _memprof.measuring()
        if self.schedule is None:
            return True
        if module in self.known:  # a submodule recomputed under checkpointing: its pass's
            return True
        warmup, calls = self.schedule
        label = self._root_label(module)
        n = self.root_calls[label] = self.root_calls.get(label, 0) + 1
        if calls is not None and n == warmup + calls:
            self.roots_done.add(label)
            if len(self.roots_done) == len(self.root_calls):
                self.finish_pending = True
        return n > warmup and (calls is None or n <= warmup + calls)

    def _finish(self):
        self.finish_pending = False
        boot = sys.modules.get("_memprof_bootstrap")
        if boot is not None:
            boot.finish_schedule()

    # --- saved tensors ------------------------------------------------------------------

    def _lend_hooks_to_disablers(self, autograd):
        """torch.func's grad/vjp/jacrev refuse to run while any saved-tensors hook is pushed
        (`_saved_tensors_hooks_disable` raises). So that the program runs as without memprof,
        memprof's hook steps aside while hooks are disabled and comes back when they are
        enabled again; a hook of the program's own still makes them fail, as it would."""
        disable, enable = autograd._saved_tensors_hooks_disable, autograd._saved_tensors_hooks_enable
        top, pop, push = (
            autograd._top_saved_tensors_default_hooks,
            autograd._pop_saved_tensors_default_hooks,
            autograd._push_saved_tensors_default_hooks,
        )
        local, pack, unpack = self.local, self.pack, self.unpack

        def hooks_disable(message, *args, **kwargs):
            hooks = top(False)
            if hooks is not None and hooks[0] == pack:
                pop()
                local.lent = getattr(local, "lent", 0) + 1
            return disable(message, *args, **kwargs)

        def hooks_enable():
            enable()
            lent = getattr(local, "lent", 0)
            if lent:
                local.lent = 0
                for _ in range(lent):
                    push(pack, unpack)

        autograd._saved_tensors_hooks_disable = hooks_disable
        autograd._saved_tensors_hooks_enable = hooks_enable

    def pack(self, t):
        stack = getattr(self.local, "stack", None)
        if stack:
            try:
                if self._on_device(t):
                    call = stack[-1]
                    ptr, n = _storage_key_bytes(t)
                    p = call.pass_
                    if ptr not in p.state_storages and ptr not in p.saved_storages:
                        p.saved_storages.add(ptr)
                        call.saved += n
            except Exception:
                pass
        return t, t._version

    @staticmethod
    def unpack(packed):
        t, version = packed
        if t._version != version:
            # What autograd itself raises when no hook is set (it skips the check with one).
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{t.type()} {list(t.shape)}] is at version {t._version}; "
                f"expected version {version} instead. (memprof --modules reports this through "
                "its saved-tensors hook; the same program fails without memprof.)"
            )
        return t

    # --- backward -----------------------------------------------------------------------

    def backward_start(self, backward):
        if backward.scope:
            return
        backward.pending = backward.inputs
        backward.scope = _memprof.scope_open()
        backward.slot = self._timeline_slot(self._backward_entry(backward))
        _history_context(backward.entry, "backward")
        self.open_backward[id(backward)] = backward
        if not self.callback_queued:
            self.callback_queued = True
            try:
                self.torch.autograd.Variable._execution_engine.queue_callback(self.backward_done)
            except Exception:
                self.callback_queued = False

    def backward_end(self, backward):
        if not backward.scope:
            return
        reading = _memprof.scope_close(backward.scope)
        backward.scope = 0
        _history_context(None, "backward")
        self.open_backward.pop(id(backward), None)
        self._record(self._backward_entry(backward), reading)
        self._fill(backward.slot, reading)

    def backward_done(self):
        """The backward pass ended: the backward of calls whose inputs needed no gradient ends."""
        self.callback_queued = False
        for backward in list(self.open_backward.values()):
            self.backward_end(backward)
        for handle in self.leaf_hooks:
            handle.remove()
        self.leaf_hooks.clear()
        if self.finish_pending:
            self._finish()

    def _backward_entry(self, backward):
        f = backward.entry
        key = (f["root"], f["module"], "backward")
        entry = self.entries.get(key)
        if entry is None:
            entry = dict(f, phase="backward", calls=0, delta_bytes=0, peak_bytes=None,
                         peak_increase_bytes=None, saved_bytes=None, collectives={})
            self.entries[key] = entry
        return entry

    def active(self):
        """The module calls running now: this thread's forward calls, outermost first, then the
        modules whose backward is under way."""
        def label(entry, phase):
            name = entry["root"] + ("." + entry["module"] if entry["module"] else "")
            return f"{name} ({phase})"

        running = [label(c.entry, "forward") for c in getattr(self.local, "stack", None) or ()]
        running += [label(b.entry, "backward") for b in list(self.open_backward.values())]
        return running

    # --- report -------------------------------------------------------------------------

    def report(self):
        for backward in list(self.open_backward.values()):
            self.backward_end(backward)
        # Parameters as the modules hold them at the end, at rest: during a call, FSDP2 has
        # swapped its sharded parameters for the gathered ones (a module that is gone keeps the
        # count of its first call).
        for (label, name, _), ref in self.entry_modules.items():
            module = ref()
            if module is None:
                continue
            local, unsharded = self._parameter_bytes(module)
            for phase in ("forward", "backward"):
                entry = self.entries.get((label, name, phase))
                if entry is not None:
                    entry["parameter_bytes"] = local
                    entry["unsharded_parameter_bytes"] = unsharded
        chain = None
        if self.best_chain is not None:
            label, calls = self.best_chain
            chain = {"root": label, "calls": [
                {"module": n, "depth": d, "saved_bytes": s, "input_bytes": i, "leaf": c == 0}
                for (n, d, s, i, c) in (c for c in calls if c is not None)
            ]}
        warnings = []
        if self.unmeasured_passes:
            warnings.append(
                f"{self.unmeasured_passes} root module calls ran under the program's own "
                "saved-tensors hooks (activation checkpointing, save_on_cpu): memprof left those "
                "hooks alone, so what those calls saved for backward is not counted"
            )
        return {
            "warnings": warnings,
            "entries": list(self.entries.values()),
            "timeline": self.timeline,
            "timeline_dropped": self.timeline_dropped,
            "chain": chain,
        }


def _tensors_in(value, torch, depth=0):
    if isinstance(value, torch.Tensor):
        return [value]
    out = []
    if depth > 3:
        return out
    if isinstance(value, (list, tuple)):
        for v in value:
            out.extend(_tensors_in(v, torch, depth + 1))
    elif isinstance(value, dict):
        for v in value.values():
            out.extend(_tensors_in(v, torch, depth + 1))
    return out


def _install_on(module_mod):
    _tracker.handles = [
        module_mod.register_module_forward_pre_hook(_tracker.forward_pre),
        module_mod.register_module_forward_hook(_tracker.forward_post, always_call=True),
    ]


def uninstall():
    """The schedule is complete: module calls run without memprof's hooks from now on."""
    if _tracker is not None:
        for handle in _tracker.handles:
            handle.remove()
        _tracker.handles = []


def install(device_type, device_index, plan=False, schedule=None, follow_targets=False):
    """Arms the tracker: now if torch.nn is loaded, else when `torch.nn.modules.module` is."""
    global _tracker
    _tracker = Tracker(device_type, device_index, plan, schedule, follow_targets)
    import _memprof_imports

    _memprof_imports.after_import("torch.nn.modules.module", _install_on)


def report():
    return None if _tracker is None else _tracker.report()


def active():
    return [] if _tracker is None else _tracker.active()


def active_at(exc):
    """The module calls that were running when `exc` left the innermost one."""
    if _tracker is None or _tracker.exception_active[0] != id(exc):
        return []
    return _tracker.exception_active[1]


def _history_context(entry, phase):
    """--history on CUDA: the module call running (its qualified name and phase) becomes the
    user_metadata of the allocator's events from now on; None clears it."""
    history = sys.modules.get("_memprof_history")
    if history is not None and history.recording():
        label = "" if entry is None else "module %s %s" % (entry["module"] or entry["root"], phase)
        history.module_context(label)
