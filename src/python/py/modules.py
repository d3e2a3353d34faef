# memprof's module tracker (`memprof run --modules`), run inside the profiled interpreter.
#
# Every torch.nn.Module call, forward and backward, becomes a measurement scope (allocated bytes
# at start and end, exact peak while open). Forward calls are seen by memprof's stand-in for
# torch's `Module.__call__` (`_wrapped_call_impl`: _install_on, _stand_in), or where torch's cannot
# be stood in for, a wrapper of `Module._call_impl`; their per-call work is native
# (src/python/ext/module_calls.rs:
# the call stacks, scopes, readings, timeline); this tracker answers what needs Python: root
# calls, names, the schedule, --history's context, and the report. A call's backward starts when
# the gradient of one of its outputs is ready and ends when those of all its inputs are, or when
# the backward pass ends: seen by C++ hooks on the autograd nodes that produced them
# (src/torch/cpp/grad_hooks.cpp, no Python in backward), or, with --history or a schedule of root
# calls, by plain tensor hooks (which wrap nothing and return nothing); src/capture/backward.rs
# keeps that state for both.
# Bytes saved for backward are counted without a hook: memprof stands in for SavedVariable's
# constructor in torch's libraries (src/torch/cpp/saved_interpose.cpp), and a root module's
# forward that the program runs under no saved-tensors hook of its own counts what it sees. Where
# that cannot be done (or MEMPROF_SAVED_HOOKS=hooks|python asks), a pack hook counts instead
# (src/python/ext/saved.rs, in C++ where it tops the stack), pushed only while such a forward runs.
# Nothing here keeps a tensor alive beyond what autograd itself keeps. Sharded (DTensor)
# parameters count by their local shard, with their full size beside it. With --warmup/--calls,
# only the scheduled root calls (or the module calls inside the targets' measured calls) are
# measured.
import os
import sys
import threading
import weakref

import _memprof

_tracker = None
# The --history module when --history is on (set by install()).
_history = None

# What _memprof.module_enter/module_exit ask of the tracker (src/python/ext/module_calls.rs);
# _PASS: the call runs unmeasured (torch is compiling).
_ROOT, _SITE, _FOLLOW_UP, _ROOT_ENDED, _PASS = 1, 2, 3, 4, 5


class _ThreadState(threading.local):
    """Per thread: the root pass running, and how many saved-tensors hooks are lent out. Class
    defaults, so that reading one never raises (a missing attribute costs an exception)."""

    pass_ = None
    lent = 0


class _TensorHook:
    """With --history or a schedule of root calls, the one gradient hook memprof puts on a
    tensor (per version: an in-place op moves later hooks to its new node) in a forward pass,
    shared by every module call that has the tensor as an output (its backward starts) or an
    input (one of the gradients it waits for). A plain tensor hook: it returns None, so the
    gradient passes unchanged. (Without them, C++ hooks do this: src/torch/cpp/grad_hooks.cpp.)"""

    __slots__ = ("ref", "starts", "ends")

    def __init__(self, ref):
        self.ref = ref
        self.starts = []
        self.ends = []

    def __call__(self, grad):
        tracker = _tracker
        for token in self.starts:
            tracker.grad_event(token, 0)
        for token in self.ends:
            tracker.grad_event(token, 1)


class _Pass:
    """One forward pass of a root module on a thread: its root, whether it counts what autograd
    saves (through memprof's stand-in, or else the saved-tensors hooks memprof pushed for it),
    and (with Python tensor hooks) the hook on each tensor version."""

    __slots__ = ("root", "state", "counted", "hooks")

    def __init__(self, root, state):
        self.root = root
        # Weak references to the modules whose parameters and buffers are not activations.
        self.state = state
        self.counted = False
        # (id of a tensor, its version) -> its _TensorHook, while the pass's forward runs.
        self.hooks = {}


def _wraps_a_compiled_module(module):
    """Whether `module` is torch.compile's wrapper (it holds the module it compiles as
    `_orig_mod`), asked of the module's own dicts: `hasattr` would ask nn.Module's
    `__getattr__`, which raises and formats an AttributeError for every other module, about 20 µs
    at each root call after a step had left the caches cold."""
    attributes = module.__dict__
    return "_orig_mod" in attributes or "_orig_mod" in attributes.get("_modules", ())


def _storage_key_bytes(t):
    st = t.untyped_storage()
    return st.data_ptr(), st.nbytes()


class Tracker:
    """The slow paths and the report. Each module call's own bookkeeping (its stack, scopes,
    saved bytes, backward hooks, readings, timeline) is native (src/python/ext/module_calls.rs);
    it asks this tracker about root calls and new modules, and names entries by their ids."""

    def __init__(self, device_type, device_index, plan, schedule=False, follow_targets=False):
        # Only checkpoint suggestions need the bytes of each call's inputs.
        self.plan = plan
        self.device_type = device_type
        self.device_index = device_index
        self.local = _ThreadState()
        # Forward entries: (root label, module name) -> id, and per id its fields and module
        # (its parameters are counted again when the run ends). The numbers are native.
        self.entry_ids = {}
        self.entries = {}
        self.entry_modules = {}
        self.root_labels = weakref.WeakKeyDictionary()
        self.root_label_count = {}
        self.names = weakref.WeakKeyDictionary()  # root -> WeakKeyDictionary(module -> name)
        # root -> weak references to its modules, whose parameters and buffers are not
        # activations (saved_begin).
        self.state_of = weakref.WeakKeyDictionary()
        # Submodule -> (its root, its name): a submodule called with no module running (activation
        # checkpointing recomputing it during backward) keeps its name.
        self.known = weakref.WeakKeyDictionary()
        self.tensor_type = None
        # Backward through C++ gradient hooks (no Python in backward): not with --history, whose
        # module context is set from Python, nor with a schedule of root calls, which ends
        # from the end of a backward pass.
        self.native = _history is None and not schedule
        self.callback_queued = False
        self.torch = None
        # Root forward passes that ran under the program's own saved-tensors hooks.
        self.unmeasured_passes = 0
        # Hooks on leaf tensors (which outlive a graph): removed when a backward pass ends.
        self.leaf_hooks = []
        # --warmup/--calls: each root module's forward calls counted here and judged by the
        # schedule's one rule (`_memprof.schedule_verdict`, in Rust) when `schedule`, or the
        # targets' measured calls followed (follow_targets); forward calls of each root so far.
        self.schedule = schedule
        self.follow_targets = follow_targets
        self.root_calls = {}
        self.roots_done = set()
        self.finish_pending = False
        # (torch.nn.Module, {attribute: (memprof's, torch's)}) while memprof's are in place.
        self.wrapped = None
        # Saved tensors are counted by memprof's stand-in for SavedVariable's constructor (no
        # hook); else by pushed hooks.
        self.interposed = False
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

    def _entry(self, label, name, module):
        """The forward entry's id, made at its first call."""
        key = (label, name)
        entry = self.entry_ids.get(key)
        if entry is None:
            local, unsharded = self._parameter_bytes(module)
            entry = self.entry_ids[key] = _memprof.modules_entry()
            self.entries[entry] = {
                "root": label,
                "module": name,
                "type": type(module).__name__,
                "depth": 0 if name == "" else name.count(".") + 1,
                "parameter_bytes": local,
                "unsharded_parameter_bytes": unsharded,
            }
            self.entry_modules[entry] = weakref.ref(module)
        return entry

    def _site(self, root, module, parent):
        """(the module's forward entry under this root, whether to keep it for the module): a
        module built on the fly, named by its caller (`parent`, an entry id), is named anew
        each call."""
        name = self._name_in(root, module)
        keep = name is not None
        if not keep:
            own = f"({type(module).__name__})"
            parent_name = self.entries[parent]["module"] if parent >= 0 else ""
            name = f"{parent_name}.{own}" if parent_name else own
        return self._entry(self._root_label(root), name, module), keep

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

    # --- forward ------------------------------------------------------------------------

    def _first_call(self):
        torch = self.torch = sys.modules["torch"]
        self.tensor_type = torch.Tensor
        _memprof.modules_configure(torch.Tensor, vars(torch.compiler), self.native,
                                   bool(self.plan))
        # Saved tensors counted without a hook (src/torch/cpp/saved_interpose.cpp); else by
        # hooks, whose work C++ does where they top the stack (src/torch/cpp/saved_hooks.cpp).
        # MEMPROF_SAVED_HOOKS=hooks asks for those, =python for the hooks in Python.
        hooks = os.environ.get("MEMPROF_SAVED_HOOKS")
        if hooks not in ("hooks", "python"):
            self.interposed = _memprof.saved_interpose(True)
        if not self.interposed:
            self._lend_hooks_to_disablers(torch._C._autograd)
            if hooks != "python":
                _memprof.saved_native(_memprof.saved_pack)
        return torch

    def enter_slow(self, module, args, todo):
        """What module_enter asked of Python: a root call, a new site, or a follow-up."""
        what, token, entry = todo
        if what == _SITE:
            root = self.local.pass_.root
            entry, keep = self._site(root, module, entry)
            todo = _memprof.module_enter_site(root, module, args, entry, keep)
        elif what == _ROOT:
            todo = self._enter_root(module, args)
        if todo is not None:
            self._entered(args, *todo)

    def _enter_root(self, module, args):
        # Module calls inside a root call that the schedule skips are not measured.
        if not self._measures(module):
            _memprof.module_skip(module)
            return None
        torch = self.torch
        pass_ = self._root_pass(module, torch.is_grad_enabled(), torch)
        # The scope opens first: a root call's scope follows the program to the CUDA device it
        # uses now, and the entry's parameter bytes are counted on that device.
        scope = _memprof.module_root_window()
        if self.device_type == "cuda":
            self.device_index = _memprof.measured_device()
        _memprof.saved_begin(pass_.state, self.device_index, torch.nn.Parameter,
                             pass_.counted and self.interposed)
        self.local.pass_ = pass_
        entry, keep = self._site(pass_.root, module, -1)
        return _memprof.module_enter_root(pass_.root, module, args, scope, entry, keep,
                                          self.device_index)

    def _entered(self, args, what, token, entry):
        """A call started, with --history or Python tensor hooks."""
        if _history is not None and _history.recording():
            _history_context(self.entries[entry], "forward")
        if not self.native and self.torch.is_grad_enabled():
            pass_ = self.local.pass_
            tensor = self.tensor_type
            for a in args:
                if isinstance(a, tensor) and a.requires_grad:
                    hook = self._tensor_hook(pass_, a)
                    if hook is not None:
                        hook.ends.append(token)
                        _memprof.modules_hooked(token, entry, False)

    def _root_pass(self, module, grad, torch):
        """The pass a root call starts: a recomputed submodule's keeps its root's names."""
        known = self.known.get(module)
        if known is not None and known[0]() is not None:
            return _Pass(known[0](), ())
        # The root's modules (found once, with their names), whose parameters and buffers
        # saved_begin reads at each root call: parameters are swapped (FSDP2, `.to()`). Weak
        # references, made once per root: a module dropped since is passed over.
        state = self.state_of.get(module)
        if state is None:
            self._name_in(module, module)
            state = self.state_of[module] = tuple(weakref.ref(m) for m in self.names[module])
        pass_ = _Pass(module, state)
        # Not around a compiled module (dynamo would inline a hook into its graphs), and not
        # under the program's own saved-tensors hooks (activation checkpointing, save_on_cpu):
        # they decide what is kept (and memprof's hooks on top would take their place).
        if grad and not _wraps_a_compiled_module(module):
            if torch._C._autograd._top_saved_tensors_default_hooks(False) is None:
                pass_.counted = True
                if not self.interposed:
                    torch._C._autograd._push_saved_tensors_default_hooks(
                        _memprof.saved_pack, _memprof.saved_unpack)
            else:
                self.unmeasured_passes += 1
        return pass_

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

    def left_with(self, module, exc):
        """An exception leaves the module's forward: the first module it leaves tells which calls
        were running when it was raised; the call ends here."""
        if id(exc) != self.exception_active[0]:
            self.exception_active = (id(exc), self.active())
        todo = _memprof.module_exit(module, None)
        if todo is not None:
            self.exit_slow(None, todo)

    def exit_slow(self, output, todo):
        """What module_exit asked of Python: follow-ups, and the end of a root call."""
        what, token, entry, parent, hooked = todo
        if _history is not None and _history.recording():
            _history_context(self.entries[parent] if parent >= 0 else None, "forward")
        pass_ = self.local.pass_
        if not self.native and output is not None and self.torch.is_grad_enabled():
            tensor = self.tensor_type
            outputs = (output,) if isinstance(output, tensor) else _tensors_in(output, tensor)
            for t in outputs:
                if t.requires_grad:
                    hook = self._tensor_hook(pass_, t)
                    if hook is not None:
                        hook.starts.append(token)
                        _memprof.modules_hooked(token, entry, True)
                        hooked = True
        if what != _ROOT_ENDED:
            return
        # The pass's forward is over: later passes hook their own tensors.
        self.local.pass_ = None
        if pass_ is not None:
            pass_.hooks = {}
            if pass_.counted and not self.interposed:  # memprof pushed its hooks for it
                self.torch._C._autograd._pop_saved_tensors_default_hooks()
                pass_.counted = False
        if self.finish_pending and not hooked:
            # The last scheduled root call, with no backward to wait for: stop now; else
            # when its backward pass ends (or when the next root call starts).
            self._finish()

    # --- schedule (--warmup/--calls) ----------------------------------------------------

    def _measures(self, module):
        """Whether a root call starting now is measured."""
        if self.finish_pending:
            self._finish()
            return False
        if self.follow_targets:
            return _memprof.measuring()
        if not self.schedule:
            return True
        if module in self.known:  # a submodule recomputed under checkpointing: its pass's
            return True
        label = self._root_label(module)
        n = self.root_calls[label] = self.root_calls.get(label, 0) + 1
        measured, last = _memprof.schedule_verdict(n)
        if last:
            self.roots_done.add(label)
            if len(self.roots_done) == len(self.root_calls):
                self.finish_pending = True
        return measured

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

    # --- backward (Python tensor hooks) -------------------------------------------------

    def grad_event(self, token, kind):
        """A gradient a call waits for arrived (kind 0: an output's, its backward starts; 1: an
        input's): the same bookkeeping as the C++ hooks' (src/capture/backward.rs)."""
        queue, opened, closed = _memprof.modules_grad_event(token, kind)
        if queue and not self.callback_queued:
            self.callback_queued = True
            try:
                self.torch.autograd.Variable._execution_engine.queue_callback(self.backward_done)
            except Exception:
                self.callback_queued = False
        if _history is not None and _history.recording() and (opened or closed):
            entry = _memprof.modules_entry_of(token) if opened else None
            _history_context(None if entry is None else self.entries[entry], "backward")

    def backward_done(self):
        """The backward pass ended: the backward of calls whose inputs needed no gradient ends."""
        self.callback_queued = False
        _memprof.modules_grad_event(0, 2)
        if _history is not None and _history.recording():
            _history_context(None, "backward")
        for handle in self.leaf_hooks:
            handle.remove()
        self.leaf_hooks.clear()
        if self.finish_pending:
            self._finish()

    def active(self):
        """The module calls running now: this thread's forward calls, outermost first, then the
        modules whose backward is under way."""
        def label(entry, phase):
            e = self.entries[entry]
            name = e["root"] + ("." + e["module"] if e["module"] else "")
            return f"{name} ({phase})"

        forward, backward = _memprof.modules_running()
        return [label(e, "forward") for e in forward] + [label(e, "backward") for e in backward]

    # --- report -------------------------------------------------------------------------

    def report(self):
        numbers, timeline, dropped, best = _memprof.modules_data()
        # Parameters as the modules hold them at the end, at rest: during a call, FSDP2 has
        # swapped its sharded parameters for the gathered ones (a module that is gone keeps the
        # count of its first call).
        for entry, ref in self.entry_modules.items():
            module = ref()
            if module is not None:
                local, unsharded = self._parameter_bytes(module)
                self.entries[entry]["parameter_bytes"] = local
                self.entries[entry]["unsharded_parameter_bytes"] = unsharded
        entries = []
        for entry, (forward, calls, delta, peak, increase, saved, collectives) in enumerate(numbers):
            fields = self.entries[entry if forward is None else forward]
            entries.append(dict(
                fields,
                phase="forward" if forward is None else "backward",
                calls=calls,
                delta_bytes=delta,
                peak_bytes=peak,
                peak_increase_bytes=increase,
                saved_bytes=saved,
                collectives=dict(collectives),
            ))
        if _memprof.allocation_trace_on():
            # --trace names each allocation by the module running it (entry ids index these).
            _memprof.name_trace_modules(
                [e["root"] + ("." + e["module"] if e["module"] else "") for e in entries])
        chain = None
        if best is not None:
            root, calls = best
            chain = {"root": self.entries[root]["root"], "calls": [
                {"module": self.entries[e]["module"], "depth": self.entries[e]["depth"],
                 "saved_bytes": s, "input_bytes": i, "leaf": c == 0}
                for (e, s, i, c) in calls
            ]}
        import _memprof_compiled_modules

        warnings = []
        try:
            compiled, compiled_chain = _memprof_compiled_modules.report()
        except Exception as e:  # the compiled rows are missing; the rest of the report stands
            compiled, compiled_chain = [], None
            warnings.append(f"the compiled models' modules could not be read: {type(e).__name__}: {e}")
        if self.unmeasured_passes:
            warnings.append(
                f"{self.unmeasured_passes} root module calls ran under the program's own "
                "saved-tensors hooks (activation checkpointing, save_on_cpu): memprof left those "
                "hooks alone, so what those calls saved for backward is not counted"
            )
        return {
            "warnings": warnings,
            "entries": entries,
            "timeline": [_timeline_item(entries[e], reading, saved)
                         for e, reading, saved in timeline],
            "timeline_dropped": dropped,
            "chain": chain,
            "compiled": compiled,
            "compiled_chain": compiled_chain,
        }


def _timeline_item(entry, reading, saved):
    item = {"root": entry["root"], "module": entry["module"], "phase": entry["phase"]}
    if reading is not None:
        item["start_bytes"], item["end_bytes"], item["peak_bytes"] = reading
        if saved is not None:
            item["saved_bytes"] = saved
    return item


def _tensors_in(value, tensor, depth=0):
    if isinstance(value, tensor):
        return [value]
    out = []
    if depth > 3:
        return out
    if isinstance(value, (list, tuple)):
        for v in value:
            out.extend(_tensors_in(v, tensor, depth + 1))
    elif isinstance(value, dict):
        for v in value.values():
            out.extend(_tensors_in(v, tensor, depth + 1))
    return out


def _install_on(module_mod):
    """Puts memprof's measurement in every module call (`Module.__call__` runs them all): memprof's
    stand-in for torch's `_wrapped_call_impl` (_stand_in) where torch's is the one memprof knows,
    else a wrapper of `Module._call_impl` (_wrap_call_impl). Not torch's global module hooks: any
    global hook sends every module call down the slow path of `_call_impl` (its hook dicts built
    and walked, four more Python calls), which costs more than memprof's own work. Inside a
    graph that dynamo traces, or while `torch.compiler.is_compiling()` (non-strict export), both
    run torch's code alone, so compiled code is as without memprof: `_enter` (module_enter)
    answers _PASS then, checking torch's flag natively, and dynamo traces it as answering _PASS
    (_teach_dynamo)."""
    global _enter
    module_cls = module_mod.Module
    _enter = _first_enter
    replaced = _stand_in(module_cls) or _wrap_call_impl(module_cls)
    for name, (ours, _) in replaced.items():
        setattr(module_cls, name, ours)
    _tracker.wrapped = (module_cls, replaced)


def _stand_in(module_cls):
    """memprof's `_wrapped_call_impl`, in place of torch's as `Module.__call__` and
    `Module._wrapped_call_impl`: torch's code line for line, with memprof's calls before and
    after `self._call_impl(...)`, compiled as torch's file at torch's lines, so that its frame is
    the one a plain run has in every traceback (the same file, line, function and columns),
    stack and `warnings` stack level; no frame is added to a module call. {} where torch's is not
    the code memprof knows (then the wrapper of `_call_impl`)."""
    import dis
    import inspect

    torch_call = module_cls.__dict__.get("_wrapped_call_impl")
    torch_call = getattr(torch_call, "_memprof_original", torch_call)  # an earlier session's
    current = module_cls.__dict__.get("__call__")
    if torch_call is None or getattr(current, "_memprof_original", current) is not torch_call:
        return {}  # the program's own `__call__` is in place
    # dynamo runs a frame of torch's file as it is, where it compiled the wrapper of `_call_impl`
    # (whose `_enter` answered _PASS in the graph): module_enter answers _PASS while dynamo's
    # callback is set, which it asks of torch.
    dynamo = getattr(getattr(sys.modules["torch"], "_C", None), "_dynamo", None)
    callback = getattr(getattr(dynamo, "eval_frame", None), "get_eval_frame_callback", None)
    if callback is None:
        return {}
    try:
        lines, first = inspect.getsourcelines(torch_call)
    except (OSError, TypeError):
        return {}
    body = [line.split("#")[0].rstrip() for line in lines]
    shape = ["def _wrapped_call_impl(self, *args, **kwargs):",
             "if self._compiled_call_impl is not None:",
             "return self._compiled_call_impl(*args, **kwargs)",
             "else:",
             "return self._call_impl(*args, **kwargs)"]
    if [line.strip() for line in body] != shape or first < 2 or lines[0][:1] not in (" ", "\t"):
        return {}
    indent = body[1][:len(body[1]) - len(body[1].lstrip())]
    column = body[4].index("self._call_impl")
    assign = indent + "try: out"
    if column - len(assign) < 3:
        return {}
    assign += " " * (column - len(assign) - 2) + "= "
    # Lines 0-2 are torch's; line 3 (torch's `else:`) starts the call; line 4 calls
    # `self._call_impl` at torch's columns; the rest stand on the lines after torch's function.
    source = [""] * (first - 2) + ["class Module:"] + lines[:3] + [
        indent + "todo = _enter(self, args); passing = todo is not None and "
        "(todo[0] == _PASS or _tracker.enter_slow(self, args, todo))",
        assign + "self._call_impl(*args, **kwargs)",
        indent + "except BaseException as exc:",
        indent + "    if not passing:",
        indent + "        _tracker.left_with(self, exc)",
        indent + "    raise",
        indent + "if passing:",
        indent + "    return out",
        indent + "todo = _leave(self, out)",
        indent + "if todo is not None:",
        indent + "    _tracker.exit_slow(out, todo)",
        indent + "return out",
    ]
    code = torch_call.__code__
    namespace = {}
    try:
        exec(compile("\n".join(line.rstrip("\n") for line in source) + "\n", code.co_filename,
                     "exec"), globals(), namespace)
    except SyntaxError:
        return {}
    ours = namespace["Module"].__dict__["_wrapped_call_impl"]

    def calls(function):
        return [i.positions for i in dis.get_instructions(function)
                if i.opname == "CALL_FUNCTION_EX"]

    # Where an exception in either call is shown: the same lines and columns as torch's.
    torchs = calls(torch_call)
    if (len(torchs) != 2 or calls(ours)[:2] != torchs
            or ours.__qualname__ != torch_call.__qualname__):
        return {}
    ours.__module__, ours.__doc__ = torch_call.__module__, torch_call.__doc__
    ours._memprof_original = torch_call
    _memprof.modules_under_dynamo(callback)
    return {"__call__": (ours, torch_call), "_wrapped_call_impl": (ours, torch_call)}


def _wrap_call_impl(module_cls):
    """Wraps `Module._call_impl`, which every module call runs, in memprof's measurement: one
    Python frame more per module call, which it takes out of the tracebacks it passes on."""
    original = module_cls._call_impl
    original = getattr(original, "_memprof_original", original)  # an earlier session's wrapper
    tracker = _tracker
    leave = _memprof.module_exit

    def _call_impl(self, *args, **kwargs):
        todo = _enter(self, args)
        if todo is not None:
            if todo[0] == _PASS:
                return original(self, *args, **kwargs)
            tracker.enter_slow(self, args, todo)
        try:
            output = original(self, *args, **kwargs)
        except BaseException as exc:
            tracker.left_with(self, exc)
            # The traceback is the program's own: this frame's entry leaves it, and a bare
            # `raise` adds none back.
            tb = exc.__traceback__
            if tb is not None and tb.tb_frame.f_code is _call_impl.__code__:
                exc.__traceback__ = tb.tb_next
            del exc, tb
            raise
        todo = leave(self, output)
        if todo is not None:
            tracker.exit_slow(output, todo)
        return output

    # dynamo recognizes torch's `_call_impl` by name, and inlines this one like it.
    _call_impl.__name__ = _call_impl.__qualname__ = "_call_impl"
    _call_impl._memprof_original = original
    return {"_call_impl": (_call_impl, original)}


def _first_enter(module, args):
    """The first module call: torch is loaded now. Later calls go straight to module_enter,
    which answers _PASS while torch says it is compiling."""
    global _enter
    _tracker._first_call()
    _enter = _memprof.module_enter
    import _memprof_imports
    _memprof_imports.after_import("torch._dynamo", _teach_dynamo)
    return _enter(module, args)


# module_enter's answer inside a graph that dynamo traces: run the module as torch would.
_PASSING = (_PASS, 0, -1)
# What memprof's stand-in for `Module.__call__` calls when a module call ends.
_leave = _memprof.module_exit


def _teach_dynamo(_dynamo):
    """Tells dynamo, once the program loads it, what module_enter (native, which dynamo cannot
    trace) answers inside a graph: _PASS, as torch.compiler.is_compiling() did in the wrapper.
    Where torch cannot be told, the wrapper asks torch.compiler.is_compiling() first, as before."""
    global _enter, _dynamo_taught
    if _dynamo_taught or _enter is not _memprof.module_enter:
        return
    try:
        import torch

        def module_enter(module, args):
            return _PASSING

        torch.compiler.substitute_in_graph(_memprof.module_enter)(module_enter)
        _dynamo_taught = True
    except Exception:
        _enter = _checked_enter


def _checked_enter(module, args):
    if sys.modules["torch"].compiler.is_compiling():
        return _PASSING
    return _memprof.module_enter(module, args)


def _passing(module, args):
    return _PASSING


# What the wrapper asks first: replaced at the first call and when the tracker stops.
_enter = _first_enter
# Whether dynamo knows module_enter's answer in a graph (once per process: it keeps it).
_dynamo_taught = False


def uninstall():
    """The schedule is complete: module calls run without memprof from now on."""
    global _enter
    _enter = _passing
    if _tracker is not None and _tracker.torch is not None:  # torch's libraries were read
        _memprof.saved_native(None)
        _memprof.saved_interpose(False)
        _memprof.saved_forget()  # the roots' state, and the watchers of their dicts
    if _tracker is not None and _tracker.wrapped is not None:
        module_cls, replaced = _tracker.wrapped
        for name, (ours, original) in replaced.items():
            # Unless something replaced it again since (then ours stays, passing calls through).
            if module_cls.__dict__.get(name) is ours:
                setattr(module_cls, name, original)
        _tracker.wrapped = None


def install(device_type, device_index, plan=False, schedule=False, follow_targets=False,
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
    """--history: the module call running (its qualified name and phase) becomes the
    user_metadata of the allocator's events from now on; None clears it."""
    label = "" if entry is None else "module %s %s" % (entry["module"] or entry["root"], phase)
    _history.module_context(label)
