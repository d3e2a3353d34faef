# memprof's Python side, run inside the profiled interpreter before the user's script.
#
# It finds the targeted code objects (in the script, in modules as they are imported, and
# through the `@profile` builtin), hands them to Rust (`_memprof.register`) and, on Python 3.12+,
# switches on sys.monitoring's local events for exactly those code objects. Nothing here runs
# per line: the hooks themselves are in Rust.
import builtins
import sys
import os
import sysconfig

import _memprof

_MONITORING = sys.version_info >= (3, 12)
_TOOL = None
_LOCAL_EVENTS = 0
_targeted_codes = set()
# Untargeted callers whose events are on while a targeted call they made runs (sys.monitoring).
_watched_codes = set()
# The schedule (--warmup/--calls) is complete: no hook is switched on again.
_finished = False


class Target:
    """One `-f` argument: `name`, `Qual.name`, `pkg.mod:Qual.name` or `path.py:Qual.name`."""

    def __init__(self, spec):
        self.spec = spec
        self.module = None
        self.path = None
        qual = spec
        head, sep, tail = spec.rpartition(":")
        if sep and head and not head.endswith(":"):
            qual = tail
            if head.endswith(".py") or os.sep in head:
                self.path = os.path.realpath(head)
            else:
                self.module = head
        self.qual = qual
        self.matched = []

    def matches(self, code):
        """Whether `code` has this target's name. Its module or file is checked once per module,
        by `could_be_in` (a scoped target) or `_is_user_file` (a bare or qualified name)."""
        q = code.co_qualname
        # A tail also matches within a module: `transformers.trainer:training_step` finds
        # `Trainer.training_step`.
        return q == self.qual or q.endswith("." + self.qual)

    def is_scoped(self):
        return self.module is not None or self.path is not None

    def could_be_in(self, module, filename):
        if self.module is not None:
            return module == self.module
        return os.path.realpath(filename) == self.path


# How Python names a module's top-level code (`code.co_qualname`), and the target for it.
MODULE_CODE = "<module>"
# The names the program's main module is compiled under: `__main__` (the script, an archive's or
# directory's `__main__.py`) and the `-m` module's own name.
_main_modules = {"__main__"}



def _is_main(module, filename):
    """Whether a module being compiled is the program's main module. `-m pkg` runs
    `pkg.__main__`; the package's own `__init__` is imported on the way, and is not it."""
    return module in _main_modules and os.path.basename(filename) != "__init__.py"


_targets = []
_unscoped_targets = []
_seen = set()
_system_dirs = ()
_script_path = None


_INSTALLED = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


def _is_user_file(filename):
    """Code a bare or qualified name may match: not the standard library or installed packages
    (any site-packages or dist-packages folder: a layered venv's, reached through a .pth, the
    system's under --system-site-packages, ~/.local's), as the peak's sites count them."""
    if not filename or filename.startswith("<") or filename.startswith(_system_dirs):
        return False
    if any(m in filename for m in _INSTALLED):
        return False
    # Only files outside the system directories pay for resolving symlinks.
    real = os.path.realpath(filename)
    return not real.startswith(_system_dirs) and not any(m in real for m in _INSTALLED)


def _walk(code):
    """The code object and every code object nested in it, in source order."""
    yield code
    for const in code.co_consts:
        if type(const) is type(code):
            yield from _walk(const)


def _last_line(code):
    last = code.co_firstlineno
    for c in _walk(code):
        for _start, _end, line in c.co_lines():
            if line is not None and line > last:
                last = line
    return last


def activate(code, label):
    """Profile this code object from now on."""
    if _finished:
        return
    _targeted_codes.add(code)
    if _memprof.register(code, label, code.co_qualname, code.co_filename, code.co_firstlineno, _last_line(code)):
        if _MONITORING:
            sys.monitoring.set_local_events(_TOOL, code, _LOCAL_EVENTS)


def scan(code, module, filename, source=None):
    """Matches every function in a freshly compiled module against the targets. `source()`
    gives the module's text where its file is not on disk (a zip archive's), for the report."""
    # Runs for every module the program imports (torch has over a thousand): decide cheaply
    # whether any target can be in this one before walking its code.
    if not _targets:
        return
    relevant = [t for t in _targets if t.is_scoped() and t.could_be_in(module, filename)]
    user = _unscoped_targets and (filename == _script_path or _is_user_file(filename))
    if user:
        relevant.extend(_unscoped_targets)
    if not relevant:
        return
    for c in _walk(code):
        if c is code:
            # The module's own top-level code (Python names it `<module>`): a scoped
            # `pkg.mod:<module>` or `path.py:<module>` names it, and a bare `<module>` the
            # program's main module (the script, `-m`'s module, an archive's `__main__`).
            for t in relevant:
                if t.qual == MODULE_CODE and (t.is_scoped() or _is_main(module, filename)):
                    t.matched.append(c)
                    activate(c, t.spec)
            continue
        _seen.add(c.co_qualname)
        for t in relevant:
            if t.matches(c):
                t.matched.append(c)
                activate(c, t.spec)
                if source is not None and not os.path.isfile(filename):
                    text = source()
                    if text:
                        _memprof.set_source(c, text)


def _underlying_code(obj):
    """The code object of a function, method, staticmethod, property getter or wrapper chain."""
    return next(_codes_along(obj), None)


def _codes_along(obj):
    """The code objects of a function and of what it wraps, outermost first: methods, static
    methods, property getters, partials and decorators' `__wrapped__`."""
    for _ in range(32):
        if _reads_run_code(obj):
            return
        code = getattr(obj, "__code__", None)
        if isinstance(code, _CodeType):
            yield code
        for attr in ("__func__", "fget", "func", "__wrapped__"):
            inner = getattr(obj, attr, None)
            if inner is not None:
                obj = inner
                break
        else:
            return


_CodeType = type(_codes_along.__code__)
_FunctionType = type(_codes_along)


def _reads_run_code(obj):
    """Whether reading an attribute of `obj` runs Python code of its class (a `__getattribute__`
    or `__getattr__` of its own: torch.distributed's deprecated `reduce_op` warns, a lazy proxy
    imports). memprof's probing for functions leaves such objects alone, so that the program's
    stderr and state are what they would be without it."""
    try:
        for k in type(obj).__mro__:
            d = k.__dict__
            if type(d.get("__getattribute__")) is _FunctionType or type(d.get("__getattr__")) is _FunctionType:
                return True
    except Exception:
        return True
    return False


def _resolve_in_loaded_module(target):
    """A `module:qualname` target whose module was imported before the script started."""
    mod = sys.modules.get(target.module)
    if mod is None:
        return
    obj = mod
    for part in target.qual.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return
    code = _underlying_code(obj)
    if code is not None and code not in target.matched:
        target.matched.append(code)
        activate(code, target.spec)


# What the import hook replaced: (class, its own get_code), for an in-process session's end.
_unwrap = []


def _install_import_hook():
    import importlib._bootstrap_external as ext

    def wrap(cls):
        original = cls.get_code

        def get_code(self, fullname):
            code = original(self, fullname)
            if code is not None:
                try:
                    scan(code, fullname, code.co_filename,
                         lambda: self.get_source(fullname))
                except Exception as e:  # never break the program's import
                    _memprof.warn(f"could not scan module {fullname!r} for targets: {e!r}")
            return code

        get_code.__wrapped__ = original
        cls.get_code = get_code
        _unwrap.append((cls, original))

    wrap(ext.SourceLoader)
    wrap(ext.SourcelessFileLoader)
    import zipimport
    wrap(zipimport.zipimporter)


def _profile_decorator(func=None):
    """`@profile`, as kernprof and pytorch_memlab provide it: marks a function for memprof."""
    code = _underlying_code(func)
    if code is not None:
        activate(code, "@profile")
    return func


def _thread_started(frame, event, arg):
    _memprof.thread_started()
    return None


def _start_monitoring():
    global _TOOL, _LOCAL_EVENTS
    mon = sys.monitoring
    for tool in (4, 3, 5):
        if mon.get_tool(tool) is None:
            _TOOL = tool
            break
    else:
        raise RuntimeError("no free sys.monitoring tool id (3, 4 and 5 are taken)")
    mon.use_tool_id(_TOOL, "memprof")
    E = mon.events
    mon.register_callback(_TOOL, E.PY_START, _memprof.on_start)
    mon.register_callback(_TOOL, E.PY_RESUME, _memprof.on_resume)
    mon.register_callback(_TOOL, E.LINE, _memprof.on_line)
    mon.register_callback(_TOOL, E.PY_RETURN, _memprof.on_return)
    mon.register_callback(_TOOL, E.PY_YIELD, _memprof.on_yield)
    _LOCAL_EVENTS = E.PY_START | E.PY_RESUME | E.LINE | E.PY_RETURN | E.PY_YIELD
    # No global event: a global PY_UNWIND (the only way to see an exception leave a frame before
    # 3.15) makes call-heavy Python code that is not targeted run 1.7x slower (BENCHMARKS.md).
    # Instead memprof watches the caller of each running target: when the caller runs again,
    # the call has returned or raised. A returning call's last line also lasts until then, so it
    # includes the release of the frame's locals.
    # CALL too, on targeted code and on watched callers: a returning call's last line ends at its
    # caller's first event after the return, a call in the same statement included.
    mon.register_callback(_TOOL, E.CALL, _memprof.on_call)
    _LOCAL_EVENTS |= E.CALL
    watch_events = E.LINE | E.PY_RETURN | E.PY_YIELD | E.CALL

    def watch(code, on):
        mon.set_local_events(_TOOL, code, watch_events if on else 0)
        if on:
            _watched_codes.add(code)
        else:
            _watched_codes.discard(code)

    _memprof.set_watcher(watch)


def finish_schedule():
    """Every target had the calls --warmup/--calls measures: switch every hook off, so that the
    rest of the run pays nothing."""
    global _finished
    _finished = True
    _memprof.stop_recording()
    if _options is not None and _options.history:
        import _memprof_history

        _memprof_history.schedule_finished()
    if _MONITORING and _TOOL is not None:
        for code in list(_targeted_codes) + list(_watched_codes):
            sys.monitoring.set_local_events(_TOOL, code, 0)
        _watched_codes.clear()
    import threading
    threading.settrace(None)
    if _options is not None and _options.modules:
        import _memprof_modules

        _memprof_modules.uninstall()


def stop():
    import _memprof_peak

    _memprof_peak.stop()
    if _MONITORING and _TOOL is not None:
        mon = sys.monitoring
        mon.set_events(_TOOL, 0)
        for event in (mon.events.PY_START, mon.events.PY_RESUME, mon.events.LINE,
                      mon.events.PY_RETURN, mon.events.PY_YIELD, mon.events.CALL):
            mon.register_callback(_TOOL, event, None)
        mon.free_tool_id(_TOOL)


def _report_before_os_exit():
    """`os._exit` ends the process at once; memprof's report is written first: the run's in
    this process, a child's in a forked child (multiprocessing's and DataLoader's workers leave
    through os._exit)."""
    import functools
    real_exit = os._exit
    main_pid = os.getpid()

    @functools.wraps(real_exit)
    def _exit(status):
        try:
            if os.getpid() == main_pid:
                _memprof.before_os_exit(int(status))
            elif "_memprof_children" in sys.modules and \
                    sys.modules["_memprof_children"].is_child():
                # A forked child (multiprocessing's, DataLoader's workers) leaves: its report.
                _memprof.child_exit(int(status))
        except BaseException:
            pass
        real_exit(status)

    os._exit = _exit


def install(specs, script_path, options):
    """Called once before the script runs. `options`: the run's `_memprof.Options` (see
    src/python/runner.rs), read by attribute."""
    _install_reports(options)
    import _memprof_peak

    _memprof_peak.install(script_path)
    global _script_path
    _script_path = script_path
    _arm(specs)
    if options.simulate_gpu is not None:
        import json

        import _memprof_simulate

        _memprof_simulate.install(json.loads(options.simulate_gpu), options.simulate_trace,
                                  _is_user_file, options.simulate_ranks)
    if not hasattr(builtins, "profile"):
        builtins.profile = _profile_decorator
    _report_before_os_exit()
    if options.follow_children is not None:
        import _memprof_children

        _memprof_children.install(options.follow_children, options.child_argv,
                                  options.script_label)
    import threading
    threading.settrace(_thread_started)


def _arm(specs):
    """The targets named by `specs` (`-f`'s), found in modules as they are compiled and in the
    ones loaded already, with the line hook ready for them."""
    global _system_dirs
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        dirs.add(os.path.join(prefix, "lib"))
    _system_dirs = tuple(os.path.realpath(d) + os.sep for d in dirs)
    _targets.extend(Target(s) for s in specs)
    _unscoped_targets.extend(t for t in _targets if not t.is_scoped())
    if _MONITORING:
        _start_monitoring()
    _memprof.set_finisher(finish_schedule)
    _install_import_hook()
    for t in _targets:
        if t.module is not None:
            _resolve_in_loaded_module(t)


def install_in_process(specs, callables, options):
    """`memprof.profile` in an interpreter that is already running (src/inprocess): the targets
    named by `specs` are found in the code loaded now and in modules imported from now on;
    `callables` are functions, methods or code objects given directly. `uninstall` undoes it
    all."""
    codes = []
    for obj in callables:
        code = obj if isinstance(obj, _CodeType) else _underlying_code(obj)
        if code is None:
            raise TypeError("memprof.profile's targets are functions (or methods) and `-f`-style "
                            "names, not %r" % (obj,))
        codes.append(code)
    _install_reports(options)
    import _memprof_peak

    _memprof_peak.install(None)
    _arm(specs)
    if _unscoped_targets:
        for code in _loaded_user_codes():
            _seen.add(code.co_qualname)
            for t in _unscoped_targets:
                if t.qual == MODULE_CODE:
                    continue
                if t.matches(code) and code not in t.matched:
                    t.matched.append(code)
                    activate(code, t.spec)
    for code in codes:
        activate(code, code.co_qualname)
    import threading
    threading.settrace(_thread_started)


def _texts_not_on_disk():
    """{file: text} of the source files Python has in linecache that are not on disk (notebook
    cells, IPython's `exec`'d strings): an in-process report quotes their lines from these."""
    import linecache

    out = {}
    for name, entry in list(linecache.cache.items()):
        if len(entry) == 4 and entry[2] and not os.path.isfile(name):
            out[name] = "".join(entry[2])
    return out


def _loaded_user_codes():
    """The code objects of the functions the user's loaded modules define (the interactive
    namespace, `__main__`, included), nested functions too: what a bare `-f` name may mean in an
    interpreter that has been running for a while."""
    out = []
    seen = set()
    for name, module in list(sys.modules.items()):
        if name.startswith("_memprof") or not hasattr(module, "__dict__"):
            continue
        filename = getattr(module, "__file__", None) or ""
        if name != "__main__" and not (filename and _is_user_file(filename)):
            continue
        for code in _codes_defined_in(name, module):
            for inner in _walk(code):
                if id(inner) not in seen:
                    seen.add(id(inner))
                    out.append(inner)
    return out


def uninstall():
    """The end of an in-process session: every hook off, every patch undone, nothing of
    memprof left running in the program."""
    import threading

    threading.settrace(None)
    if _options is not None and _options.modules:
        import _memprof_modules

        _memprof_modules.uninstall()
    while _unwrap:
        cls, original = _unwrap.pop()
        cls.get_code = original
    import _memprof_imports

    _memprof_imports.clear()


def compile_script(path):
    """Reads and compiles the script as `python script.py` does, then matches its functions."""
    import io
    with io.open_code(path) as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    scan(code, "__main__", path)
    return code


def prepare_main(path):
    """Makes `__main__` look as it does under `python script.py`."""
    import importlib.machinery
    main = sys.modules["__main__"]
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    sys.path.insert(0, os.path.dirname(os.path.realpath(path)))
    return main.__dict__


def run_module(name):
    """`python -m name`, as runpy's `_run_module_as_main` runs it; a module that cannot be found
    returns python's message instead (python exits 1 with it; there is nothing to report)."""
    import runpy
    sys.path.insert(0, os.getcwd())
    _main_modules.update((name, name + ".__main__"))
    try:
        mod_name, spec, code = runpy._get_module_details(name, runpy._Error)
    except runpy._Error as e:
        return str(e)
    sys.argv[0] = spec.origin
    runpy._run_code(code, sys.modules["__main__"].__dict__, None, "__main__", spec)
    return None


def main_in_archive_or_directory(path):
    """Whether `path` is what python runs through its `__main__` module: a directory or a zip
    archive (python tries them as import paths)."""
    import zipfile
    return os.path.isdir(path) or zipfile.is_zipfile(path)


def run_archive_or_directory(path):
    """`python dirapp/` or `python app.zip`: the path goes first on sys.path and its `__main__`
    module runs as `__main__` (sys.argv[0] stays the path, as python leaves it). None, or
    python's message when there is no `__main__` module in it."""
    import runpy
    sys.path.insert(0, os.path.abspath(path))
    try:
        mod_name, spec, code = runpy._get_main_module_details(runpy._Error)
    except runpy._Error:
        del sys.path[0]
        return f"can't find '__main__' module in {path!r}"
    runpy._run_code(code, sys.modules["__main__"].__dict__, None, "__main__", spec)
    return None


def target_warnings():
    """Messages about targets that matched nothing, or matched several functions."""
    import difflib
    out = []
    for t in _targets:
        if not t.matched:
            # Compare with whole qualified names and with their last part (`forwrd` ~ `Net.forward`).
            by_key = {}
            for q in sorted(_seen):
                by_key.setdefault(q, q)
                by_key.setdefault(q.rsplit(".", 1)[-1], q)
            near = []
            for key in difflib.get_close_matches(t.qual, list(by_key), n=6, cutoff=0.6):
                if by_key[key] not in near:
                    near.append(by_key[key])
            near = near[:3]
            msg = f"no function matched '-f {t.spec}'"
            exact = [] if t.is_scoped() else _in_loaded_packages(t.qual)
            if exact:
                # Bare and qualified names look in the user's own code only: say the form
                # that reaches into the package.
                more = f" (and {len(exact) - 4} more)" if len(exact) > 4 else ""
                msg += (" in your code; in installed packages: " +
                        ", ".join(f"-f {e}" for e in exact[:4]) + more)
            elif near:
                msg += "; nearest names: " + ", ".join(near)
            out.append(msg)
        elif len(t.matched) > 1:
            names = ", ".join(f"{c.co_qualname} ({os.path.basename(c.co_filename)}:{c.co_firstlineno})" for c in t.matched)
            out.append(f"'-f {t.spec}' matched {len(t.matched)} functions, profiling all of them: {names}")
    return out


def _in_loaded_packages(qual):
    """`module:Qual.name` of the functions the program loaded (outside its own code) whose
    qualified name is `qual` or ends with it: what `-f` must say to reach into a package."""
    found = []
    suffix = "." + qual
    for name, mod in list(sys.modules.items()):
        if name.startswith("_memprof") or not hasattr(mod, "__dict__"):
            continue
        for code in _codes_defined_in(name, mod):
            q = code.co_qualname
            if (q == qual or q.endswith(suffix)) and f"{name}:{q}" not in found:
                found.append(f"{name}:{q}")
    return sorted(found, key=lambda f: (_exported_depth(f), f))


def _exported_depth(spec):
    """How near the top of its package the class (or function) of `module:Qual.name` is
    exported: `torch.nn.modules.linear:Linear.forward` is `torch.nn.Linear` (2), a quantized
    Linear is `torch.ao.nn.quantized.Linear` (4); what no package above exports comes last. The
    usual one is listed first."""
    module, qual = spec.split(":", 1)
    first = qual.split(".", 1)[0]
    mod = sys.modules.get(module)
    obj = getattr(mod, first, None) if mod is not None else None
    if obj is None:
        return 1 << 10
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        package = sys.modules.get(".".join(parts[:depth]))
        if package is not None and getattr(package, first, None) is obj:
            return depth
    return 1 << 10


def _codes_defined_in(name, module):
    """The code objects of the functions and methods that the module `name` defines itself (its
    functions, and its classes' methods; not what it imports), outermost first."""
    try:
        values = list(vars(module).values())
    except Exception:
        return
    for obj in values:
        try:
            if _reads_run_code(obj) or getattr(obj, "__module__", None) != name:
                continue
            candidates = list(vars(obj).values()) if isinstance(obj, type) else [obj]
            codes = [code for c in candidates for code in _codes_along(c)]
        except Exception:  # objects whose attributes raise (lazy proxies): not functions
            continue
        yield from codes


def other_devices(index):
    """A warning naming the other CUDA devices this process allocated on: the report explains
    one device's peak (the one the program set last, with no --device), and says so."""
    torch = sys.modules.get("torch")
    if torch is None or index is None:
        return []
    try:
        if not torch.cuda.is_initialized():
            return []
        others = []
        for d in range(torch.cuda.device_count()):
            peak = torch.cuda.memory_stats(d).get("allocated_bytes.all.peak", 0) if d != index else 0
            if peak > 0:
                others.append("cuda:%d (peak %d B)" % (d, peak))
    except Exception:
        return []
    if not others:
        return []
    return ["this process also allocated on %s; the peak and lines explain cuda:%d, the device "
            "the program set last (torch.cuda.set_device) or --device chose: `--device N` "
            "explains another" % (", ".join(others), index)]


def device_name(index):
    torch = sys.modules.get("torch")
    if torch is None or index is None:
        return None
    try:
        if torch.cuda.is_initialized():
            return torch.cuda.get_device_name(index)
    except Exception:
        return None
    return None


# --- --modules and --tensors -------------------------------------------------------------------

_options = None  # the run's Options, set by install
_inventories = []
_MAX_EXCEPTION_INVENTORIES = 8
# The session's inventories (inventory.py's Inventories: what its latest walk found).
_inventory_state = None


def _install_reports(options):
    global _options
    _options = options
    import _memprof_oom

    if not options.in_process:
        # torch's out-of-memory observer cannot be taken off again: the command's alone.
        _memprof_oom.install(options)
    if options.history:
        import _memprof_history

        _memprof_history.install(options)
    if options.modules:
        import _memprof_compiled_modules
        import _memprof_modules

        _memprof_compiled_modules.install()

        # The schedule's policy is Rust's: with -f, module calls follow the targets' measured
        # calls (follow_targets); without, the tracker counts each root module's calls itself
        # (module_schedule).
        _memprof_modules.install(
            options.device_type,
            options.device_index,
            options.checkpoints,
            schedule=options.module_schedule,
            follow_targets=options.follow_targets,
            history=bool(options.history),
        )
    if options.tensors:
        _memprof.set_inventory(_inventory)
    if options.collectives:
        import _memprof_imports

        _memprof_imports.after_import("torch.distributed", lambda _: _announce_collectives())


# The process group's methods and what each collective counts: its kind, and which argument
# holds its full buffer (the shim's rules for the c10d ops they dispatch). The dispatcher hands
# some of those ops to memprof without their tensors; for calls from Python, this says what they
# carry beforehand. Calls from C++ (DDP's reducer) are seen in the dispatcher alone.
_GROUP_METHODS = (
    ("allreduce", "all_reduce", 0),
    ("allreduce_coalesced", "all_reduce", 0),
    ("allgather", "all_gather", 0),
    ("_allgather_base", "all_gather", 0),
    ("allgather_coalesced", "all_gather", 0),
    ("allgather_into_tensor_coalesced", "all_gather", 0),
    ("reduce_scatter", "reduce_scatter", 1),
    ("_reduce_scatter_base", "reduce_scatter", 1),
    ("reduce_scatter_tensor_coalesced", "reduce_scatter", 1),
    ("broadcast", "broadcast", 0),
    ("alltoall", "all_to_all", 1),
    ("alltoall_base", "all_to_all", 1),
    ("send", "send", 0),
    ("recv", "recv", 0),
    ("recv_anysource", "recv", 0),
    ("reduce", "other", 0),
    ("gather", "other", 1),
    ("scatter", "other", 0),
)


def _tensor_bytes(value, torch):
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v, torch) for v in value)
    return 0


def _announce_collectives():
    """--collectives: wrap torch's ProcessGroup methods so that each call says what it carries
    before it runs, unchanged."""
    torch = sys.modules["torch"]
    group = getattr(torch._C, "_distributed_c10d", None)
    group = getattr(group, "ProcessGroup", None)
    if group is None:
        return
    expect = _memprof.expect_collective
    for method, kind, which in _GROUP_METHODS:
        original = getattr(group, method, None)
        if original is None:
            continue

        def counted(self, *args, _original=original, _kind=kind, _which=which, **kwargs):
            try:
                if len(args) > _which:
                    expect(_kind, _tensor_bytes(args[_which], torch))
            except Exception:
                pass
            try:
                return _original(self, *args, **kwargs)
            finally:
                expect(None)

        counted.__wrapped__ = original
        setattr(group, method, counted)


def _inventory(qualname, call, raised, traceback):
    """A targeted call ended: the tensor inventory, kept for the first and the latest call of each
    function and for the first few exceptions."""
    global _inventory_state
    import _memprof_inventory

    if _inventory_state is None:
        _inventory_state = _memprof_inventory.Inventories()

    frames = []
    try:
        f = sys._getframe(1)
    except ValueError:  # called from memprof itself, after the program ended
        f = None
    while f is not None:
        if f.f_code in _targeted_codes:
            frames.append(f)
        f = f.f_back
    while traceback is not None:
        if traceback.tb_frame.f_code in _targeted_codes:
            frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    label = f"{'an exception left' if raised else 'end of'} {qualname} (call {call})"
    try:
        inv = _inventory_state.take(
            _options.device_type, _memprof.measured_device(), label, frames
        )
    finally:
        del frames, f
    if inv is None:
        return
    inv.update(function=qualname, call=call, raised=raised)
    same = [i for i in _inventories if i["function"] == qualname and not i["raised"]]
    if raised:
        if sum(1 for i in _inventories if i["raised"]) < _MAX_EXCEPTION_INVENTORIES:
            _inventories.append(inv)
    elif len(same) >= 2:
        # Keep the first call's and the latest call's.
        _inventories[_inventories.index(same[-1])] = inv
    else:
        _inventories.append(inv)


def _finished_inventories():
    import _memprof_inventory

    return [_memprof_inventory.finish(i) for i in _inventories]


def report(device_index):
    """Everything the Python side has for the report, as one JSON document: what --modules,
    --tensors, --history and the OOM forensics collected, the targets' warnings and the device's
    name (schema: `Collected` in src/session/sections.rs, every key always present)."""
    import json

    modules = None
    if _options.modules:
        import _memprof_modules

        modules = _memprof_modules.report()
    import _memprof_oom

    if _options.in_process:
        _memprof.file_texts(_texts_not_on_disk())
    history = None
    if _options.history:
        import _memprof_history

        history = _memprof_history.finish(_memprof.targeted_functions())
    if _options.simulate_gpu is not None:
        import _memprof_simulate

        _memprof_simulate.finish(_torch_version())
    return json.dumps({
        "modules": modules,
        "inventories": _finished_inventories() if _options.tensors else None,
        "oom": _memprof_oom.report(),
        "history": history,
        "target_warnings": target_warnings() + other_devices(device_index),
        "device_name": device_name(device_index),
        "tensor_roles": _tensor_roles(device_index),
    })


def _torch_version():
    torch = sys.modules.get("torch")
    return getattr(torch, "__version__", None)


def _tensor_roles(device_index):
    """What the peak's categories are matched against: [(storage data_ptr, category)] of every
    storage a tensor holds at the end (None: not looked for)."""
    if not _options.peak_categories:
        return None
    import _memprof_peak

    try:
        return _memprof_peak.roles(_options.device_type, device_index)
    except Exception as e:
        _memprof.warn(f"the peak's categories are unknown: {type(e).__name__}: {e}")
        return None


def uncaught(exc, traceback):
    """The program ended with `exc`: an out-of-memory error is recorded as the one not caught."""
    import _memprof_oom

    _memprof_oom.uncaught(exc, traceback)
