# memprof's module tracker (`memprof run --modules`), run inside the profiled interpreter.
#
# Every torch.nn.Module call, forward and backward, becomes a measurement scope in Rust
# (`_memprof.scope_open` / `scope_close`: allocated bytes at start and end, exact peak while
# open). Forward calls are seen through torch's global module hooks; a call's backward starts
# when the gradient of one of its outputs is ready and ends when those of all its inputs are,
# or when the backward pass ends: seen by C++ hooks on the autograd nodes that produced them
# (src/torch/grad_hooks.cpp, no Python in backward), or, with --history or a schedule of root
# calls, by plain tensor hooks (which wrap nothing and return nothing).
# Bytes saved for backward are counted by a saved-tensors pack hook (native: src/python/saved.rs)
# pushed only while a root module's forward runs and the program has no such hook of its own.
# Nothing here keeps a tensor alive beyond what autograd itself keeps. Sharded (DTensor) parameters count by their local
# shard, with their full size beside it. With --warmup/--calls, only the scheduled root calls
# (or the module calls inside the targets' measured calls) are measured.
import sys
import threading
import weakref

import _memprof

TIMELINE_CAP = 20000
_tracker = None
# The --history module when --history is on (set by install()).
_history = None


class _ThreadState(threading.local):
    """Per thread: the forward calls running (innermost last), the root calls the schedule
    skips, and how many saved-tensors hooks are lent out. Class defaults, so that reading one
    never raises (a missing attribute costs an exception)."""

    stack = None
    skip = None
    lent = 0


class _Site:
    """A module as one root module's calls name it, found once: its name, its label's forward
    entry and (from its first backward) its backward entry."""

    __slots__ = ("root_ref", "module_ref", "name", "forward", "backward")


class _Call:
    """One forward call of a module, and its backward: the backward is opened by the first of
    its outputs' gradients and closed when the gradients of all its inputs have arrived (or
    when the backward pass ends)."""

    __slots__ = ("site", "scope", "saved_from", "input_bytes", "children", "pass_", "module_id",
                 "slot", "index", "back_scope", "back_slot", "inputs", "pending")

    def __init__(self, site, scope, input_bytes, pass_, module_id, slot, index):
        self.site = site
        self.scope = scope
        # The pass's saved bytes when the call started (`_memprof.saved_bytes`).
        self.saved_from = _memprof.saved_bytes()
        self.input_bytes = input_bytes
        self.children = 0
        self.pass_ = pass_
        self.module_id = module_id
        self.slot = slot
        self.index = index
        self.back_scope = 0
        self.back_slot = None
        self.inputs = 0
        self.pending = 0


class _TensorHook:
    """The one gradient hook memprof puts on a tensor (per version: an in-place op moves later
    hooks to its new node) in a forward pass, shared by every module call that has the tensor
    as an output (its backward starts) or an input (one of the gradients it waits for). A plain
    tensor hook: it returns None, so the gradient passes unchanged."""

    __slots__ = ("ref", "starts", "ends")

    def __init__(self, ref):
        self.ref = ref
        self.starts = []
        self.ends = []

    def __call__(self, grad):
        tracker = _tracker
        for call in self.starts:
            tracker.backward_start(call)
        for call in self.ends:
            call.pending -= 1
            if call.pending <= 0:
                tracker.backward_end(call)


class _Pass:
    """One forward pass of a root module: what it saved for backward, and its calls in order."""

    __slots__ = ("root", "state_storages", "calls", "pushed", "hooks")

    def __init__(self, root, state_storages):
        self.root = root
        self.state_storages = state_storages
        # (name, depth, saved bytes, input bytes, has children) per finished call, by start.
        self.calls = []
        self.pushed = False
        # (id of a tensor, its version) -> its _TensorHook, while the pass's forward runs.
        self.hooks = {}


def _storage_key_bytes(t):
    st = t.untyped_storage()
    return st.data_ptr(), st.nbytes()


class Tracker:
    def __init__(self, device_type, device_index, plan, schedule=None, follow_targets=False):
        # Only checkpoint suggestions need the bytes of each call's inputs.
        self.plan = plan
        self.device_type = device_type
        self.device_index = device_index
        self.local = _ThreadState()
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
        # (id of a root, id of a module) -> its _Site.
        self.sites = {}
        self.tensor_type = None
        self.is_compiling = None
        # Backward through C++ gradient hooks (no Python in backward): not with --history, whose
        # module context is set from Python, nor with a schedule of root calls, which ends
        # from the end of a backward pass. Calls with C++ hooks, by token (their forward
        # scope's id), until their graph is freed.
        self.native = _history is None and schedule is None
        self.native_calls = {}
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

    def _name_in(self, root, module):
        """The module's name in `root`, or None if it is not one of root's submodules."""
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
            return
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

    def _timeline_slot(self, entry):
        """A place in the timeline, [entry, reading, saved bytes], filled when the call ends;
        report() turns it into the report's dict."""
        if len(self.timeline) >= TIMELINE_CAP:
            self.timeline_dropped += 1
            return None
        slot = [entry, None, None]
        self.timeline.append(slot)
        return slot

    # --- forward ------------------------------------------------------------------------

    def _first_call(self):
        torch = self.torch = sys.modules["torch"]
        self.tensor_type = torch.Tensor
        self.is_compiling = torch.compiler.is_compiling
        self._lend_hooks_to_disablers(torch._C._autograd)
        return torch

    def forward_pre(self, module, args):
        torch = self.torch
        if torch is None:
            torch = self._first_call()
        # Inside a graph that torch.compile traces, the hooks do nothing: dynamo folds this test
        # to True and leaves them out of the graph (tracing them would fail or break the graph).
        # The compiled module's own call, which runs eagerly, is measured.
        if self.is_compiling():
            return
        local = self.local
        stack = local.stack
        if stack is None:
            stack = local.stack = []
        grad = torch.is_grad_enabled()
        if stack:
            parent = stack[-1]
            parent.children += 1
            pass_ = parent.pass_
            parent_name = parent.site.name
        else:
            # Module calls inside a root call that the schedule skips are not measured.
            skip = local.skip
            if skip:
                skip.append(id(module))
                return
            if not self._measures(module):
                local.skip = [id(module)]
                return
            if self.native_calls:
                self._collect_native()
            pass_ = self._root_pass(module, grad, torch)
            parent_name = ""
        # The scope opens first: a root call's scope follows the program to the CUDA device it
        # uses now, and the entry's parameter bytes are counted on that device.
        scope = _memprof.scope_open()
        if not stack:
            if self.device_type == "cuda":
                self.device_index = _memprof.measured_device()
            _memprof.saved_begin(pass_.state_storages, self.device_index)
        site = self._site(pass_.root, module, parent_name)
        input_bytes = self._tensor_bytes(args, set()) if self.plan else 0
        call = _Call(site, scope, input_bytes, pass_, id(module),
                     self._timeline_slot(site.forward), len(pass_.calls))
        pass_.calls.append(None)
        stack.append(call)
        if _history is not None and _history.recording():
            _history_context(site.forward, "forward")
        if grad:
            tensor = self.tensor_type
            if self.native:
                for a in args:
                    if (isinstance(a, tensor) and a.requires_grad
                            and _memprof.grad_hook(a._cdata, scope, False)):
                        self.native_calls[scope] = call
            else:
                for a in args:
                    if isinstance(a, tensor) and a.requires_grad:
                        hook = self._tensor_hook(pass_, a)
                        if hook is not None:
                            hook.ends.append(call)
                            call.inputs += 1

    def _root_pass(self, module, grad, torch):
        """The pass a root call starts: a recomputed submodule's keeps its root's names."""
        known = self.known.get(module)
        if known is not None and known[0]() is not None:
            return _Pass(known[0](), [])
        state = []
        for t in list(module.parameters()) + list(module.buffers()):
            try:
                state.append(t.untyped_storage().data_ptr())
            except Exception:
                pass
        pass_ = _Pass(module, state)
        # Not around a compiled module (dynamo would inline the hook into its graphs), and
        # not over the program's own saved-tensors hooks (activation checkpointing,
        # save_on_cpu): on top of them, memprof's would take their place.
        if grad and not hasattr(module, "_orig_mod"):
            if torch._C._autograd._top_saved_tensors_default_hooks(False) is None:
                torch._C._autograd._push_saved_tensors_default_hooks(
                    _memprof.saved_pack, _memprof.saved_unpack)
                pass_.pushed = True
            else:
                self.unmeasured_passes += 1
        return pass_

    def _site(self, root, module, parent_name):
        """The module's site under this root, looked up by identity; found once per module
        (a module built on the fly, named by its caller, is looked up each call)."""
        key = (id(root), id(module))
        site = self.sites.get(key)
        if site is not None and site.module_ref() is module and site.root_ref() is root:
            return site
        name = self._name_in(root, module)
        site = _Site()
        site.root_ref = weakref.ref(root)
        site.backward = None
        if name is None:
            # Called inside the root but not one of its submodules (a module built on the fly).
            own = f"({type(module).__name__})"
            site.name = f"{parent_name}.{own}" if parent_name else own
            site.module_ref = weakref.ref(module)
        else:
            site.name = name
            sites = self.sites

            def forget(_, key=key, site=site):
                if sites.get(key) is site:
                    del sites[key]

            site.module_ref = weakref.ref(module, forget)
            sites[key] = site
        site.forward = self._entry(self._root_label(root), site.name, "forward", module)
        return site

    def _tensor_hook(self, pass_, tensor):
        """The pass's hook on this version of `tensor`, registered on its first use."""
        key = (id(tensor), tensor._version)
        hook = pass_.hooks.get(key)
        if hook is not None and hook.ref() is tensor:
            return hook
        hook = _TensorHook(weakref.ref(tensor))
        try:
            handle = tensor.register_hook(hook)
        except Exception:
            return None
        pass_.hooks[key] = hook
        if tensor.is_leaf:
            self.leaf_hooks.append(handle)
            if len(self.leaf_hooks) > 10000:  # forward passes with no backward
                for h in self.leaf_hooks[:5000]:
                    h.remove()
                del self.leaf_hooks[:5000]
        return hook

    def forward_post(self, module, args, output):
        torch = self.torch
        if torch is None or self.is_compiling():
            return
        if output is None:
            # Also how an exception leaving forward reaches this hook (always_call): the first
            # module it leaves tells which calls were running when it was raised.
            exc = sys.exc_info()[1]
            if exc is not None and id(exc) != self.exception_active[0]:
                self.exception_active = (id(exc), self.active())
        local = self.local
        skip = local.skip
        if skip:
            # The top is this module's, unless an exception skipped inner post-hooks.
            while skip and skip.pop() != id(module):
                pass
            return
        stack = local.stack
        module_id = id(module)
        if not stack or (stack[-1].module_id != module_id
                         and not any(c.module_id == module_id for c in stack)):
            return
        # The top call is this module's, unless an exception skipped inner post-hooks.
        while True:
            call = stack.pop()
            self._end_call(call, stack)
            if call.module_id == module_id:
                break
        hooked = False
        if output is not None and torch.is_grad_enabled():
            pass_ = call.pass_
            outputs = (output,) if isinstance(output, self.tensor_type) else _tensors_in(output, torch)
            for t in outputs:
                if not t.requires_grad:
                    continue
                if self.native:
                    if _memprof.grad_hook(t._cdata, call.scope, True):
                        self.native_calls[call.scope] = call
                        hooked = True
                else:
                    hook = self._tensor_hook(pass_, t)
                    if hook is not None:
                        hook.starts.append(call)
                        hooked = True
        if not stack:
            # The pass's forward is over: later passes hook their own tensors.
            call.pass_.hooks = {}
            if self.finish_pending and not hooked:
                # The last scheduled root call, with no backward to wait for: stop now; else
                # when its backward pass ends (or when the next root call starts).
                self._finish()

    def _end_call(self, call, stack):
        reading = _memprof.scope_close(call.scope)
        if _history is not None and _history.recording():
            _history_context(stack[-1].site.forward if stack else None, "forward")
        # What the call saved, its children's included.
        saved = _memprof.saved_bytes() - call.saved_from
        e = call.site.forward
        self._record(e, reading, saved)
        if call.slot is not None:
            call.slot[1] = reading
            call.slot[2] = saved
        pass_ = call.pass_
        pass_.calls[call.index] = (e["module"], e["depth"], saved, call.input_bytes, call.children)
        if stack:
            return
        _memprof.saved_end()
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
        local, pack, unpack = self.local, _memprof.saved_pack, _memprof.saved_unpack

        def hooks_disable(message, *args, **kwargs):
            hooks = top(False)
            if hooks is not None and hooks[0] == pack:
                pop()
                local.lent += 1
            return disable(message, *args, **kwargs)

        def hooks_enable():
            enable()
            lent = local.lent
            if lent:
                local.lent = 0
                for _ in range(lent):
                    push(pack, unpack)

        autograd._saved_tensors_hooks_disable = hooks_disable
        autograd._saved_tensors_hooks_enable = hooks_enable

    # --- backward -----------------------------------------------------------------------

    def backward_start(self, call):
        if call.back_scope:
            return
        call.pending = call.inputs
        call.back_scope = _memprof.scope_open()
        call.back_slot = self._timeline_slot(self._backward_entry(call.site))
        if _history is not None and _history.recording():
            _history_context(call.site.forward, "backward")
        self.open_backward[id(call)] = call
        if not self.callback_queued:
            self.callback_queued = True
            try:
                self.torch.autograd.Variable._execution_engine.queue_callback(self.backward_done)
            except Exception:
                self.callback_queued = False

    def backward_end(self, call):
        if not call.back_scope:
            return
        reading = _memprof.scope_close(call.back_scope)
        call.back_scope = 0
        if _history is not None and _history.recording():
            _history_context(None, "backward")
        self.open_backward.pop(id(call), None)
        self._record(call.site.backward, reading)
        if call.back_slot is not None:
            call.back_slot[1] = reading

    def backward_done(self):
        """The backward pass ended: the backward of calls whose inputs needed no gradient ends."""
        self.callback_queued = False
        for call in list(self.open_backward.values()):
            self.backward_end(call)
        for handle in self.leaf_hooks:
            handle.remove()
        self.leaf_hooks.clear()
        if self.finish_pending:
            self._finish()

    def _collect_native(self, end_all=False):
        """Records the backwards that the C++ hooks measured (in the order they started) and
        forgets calls whose graph is gone; returns the calls whose backward runs now."""
        finished, released, running = _memprof.grad_collect(end_all)
        for token, _, reading in sorted(finished, key=lambda f: f[1]):
            call = self.native_calls.get(token)
            if call is None:
                continue
            entry = self._backward_entry(call.site)
            self._record(entry, reading)
            slot = self._timeline_slot(entry)
            if slot is not None:
                slot[1] = reading
        for token in released:
            self.native_calls.pop(token, None)
        return [self.native_calls[t] for t in running if t in self.native_calls]

    def _backward_entry(self, site):
        """The site's backward entry, made from its forward entry at its first backward."""
        if site.backward is not None:
            return site.backward
        f = site.forward
        key = (f["root"], f["module"], "backward")
        entry = self.entries.get(key)
        if entry is None:
            entry = dict(f, phase="backward", calls=0, delta_bytes=0, peak_bytes=None,
                         peak_increase_bytes=None, saved_bytes=None, collectives={})
            self.entries[key] = entry
        site.backward = entry
        return entry

    def active(self):
        """The module calls running now: this thread's forward calls, outermost first, then the
        modules whose backward is under way."""
        def label(entry, phase):
            name = entry["root"] + ("." + entry["module"] if entry["module"] else "")
            return f"{name} ({phase})"

        stack = self.local.stack or ()
        running = [label(c.site.forward, "forward") for c in stack]
        backward = list(self.open_backward.values())
        if self.native_calls:
            backward += self._collect_native()
        running += [label(c.site.forward, "backward") for c in backward]
        return running

    # --- report -------------------------------------------------------------------------

    def report(self):
        for call in list(self.open_backward.values()):
            self.backward_end(call)
        if self.native:
            self._collect_native(end_all=True)
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
            "timeline": [_timeline_item(*slot) for slot in self.timeline],
            "timeline_dropped": self.timeline_dropped,
            "chain": chain,
        }


def _timeline_item(entry, reading, saved):
    item = {"root": entry["root"], "module": entry["module"], "phase": entry["phase"]}
    if reading is not None:
        item["start_bytes"], item["end_bytes"], item["peak_bytes"] = reading[:3]
        if saved is not None:
            item["saved_bytes"] = saved
    return item


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


def install(device_type, device_index, plan=False, schedule=None, follow_targets=False,
            history=False):
    """Arms the tracker: now if torch.nn is loaded, else when `torch.nn.modules.module` is."""
    global _tracker, _history
    _history = sys.modules.get("_memprof_history") if history else None
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
    label = "" if entry is None else "module %s %s" % (entry["module"] or entry["root"], phase)
    _history.module_context(label)
