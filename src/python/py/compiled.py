# memprof's view into torch.compile's generated code, run inside the profiled interpreter. Each
# graph that inductor loads (PyCodeCache.load_by_key_path: after a fresh compile and on a cache
# hit alike) comes with torch's own map from the generated wrapper's lines to the stack traces of
# the FX nodes they came from (PyCodeCache.linemaps, which torch keeps for its profiler and
# error messages). memprof hands each map to the native site finder, with the functions'
# qualified names, so an allocation made by a compiled graph is attributed to the source line
# its buffer came from. Nothing of the compile changes: same config, same cache keys, same code.
import ast
import functools
import linecache
import os
import re
import sys

import _memprof

# The frames of an FX node's `stack_trace` (traceback.format_list's text, outermost first):
# file, line, function and the line's text when the source was readable.
_FRAME = re.compile(r'File "(.+)", line (\d+), in (.+)\n(?:    (.*)\n)?')
# The function dynamo resumes after a graph break: the rest of `name`, from its line on.
_RESUME = re.compile(r"torch_dynamo_resume_in_(.+)_at_\d+")
_patched = []
_registered = set()
_stale_warned = False
# file -> [(first line, last line, name, qualified name)] of its functions, from its source.
_functions = {}


def install():
    import _memprof_imports

    _memprof_imports.after_import("torch._inductor.codecache", _wrap_loader)


def stop():
    """Puts inductor's loader back (and compile_fx, for --modules)."""
    while _patched:
        cache, original = _patched.pop()
        cache.load_by_key_path = original
    modules = sys.modules.get("_memprof_compiled_modules")
    if modules is not None:
        modules.stop()


def _wrap_loader(codecache):
    cache = getattr(codecache, "PyCodeCache", None)
    original = cache.__dict__.get("load_by_key_path") if cache is not None else None
    if not isinstance(original, classmethod):
        return
    load = original.__func__

    @functools.wraps(load)
    def load_by_key_path(cls, *args, **kwargs):
        module = load(cls, *args, **kwargs)
        try:
            _register(cls, module)
        except Exception:
            pass  # the attribution is memprof's; the program's compile must not notice
        return module

    cache.load_by_key_path = classmethod(load_by_key_path)
    _patched.append((cache, original))


def _register(cache, module):
    path = getattr(module, "__file__", None)
    if not path:
        return
    # A file without a map (a CUDA-graph partition's wrapper has none) is still inductor's:
    # looked through, so its buffers are at the line that called the graph.
    starts, traces = cache.linemaps.get(path) or ((), ())
    tags = _module_tags(path, module, starts, traces)
    if path in _registered:
        return
    _registered.add(path)
    # Each distinct trace's frames as written, read once (many lines share a node's trace).
    written = {t: _FRAME.findall(t) for t in set(traces) if isinstance(t, str)}
    moved = _this_programs_files({f for frames in written.values() for f, _, _, _ in frames})
    if moved is None:
        _warn_stale()
        if tags:
            _memprof.register_compiled(path, [], tags)
        return
    if moved:
        written = {t: [(moved.get(f, f), n, q, x) for f, n, q, x in w] for t, w in written.items()}
    frames = {t: _frames(w) for t, w in written.items()}
    entries = [(int(start), frames.get(trace, [])) for start, trace in zip(starts, traces)]
    _memprof.register_compiled(path, entries, tags)


def _module_tags(path, module, starts, traces):
    """With --modules, the module each line of the graph allocates for (compiled_modules.py);
    every load of a graph's code is its own graph there, whether or not the file is new."""
    modules = sys.modules.get("_memprof_compiled_modules")
    if modules is None or not modules.installed():
        return []
    try:
        return modules.on_load(path, module, list(starts), list(traces))
    except Exception:
        return []


def _this_programs_files(files):
    """The files that stack traces name, as files this process has loaded: {} when they are
    those, a map from each other path to this program's copy of the same file (the graph came
    from inductor's cache, compiled by a checkout of the same code elsewhere: stack traces are
    not part of the cache key), or None when some file is not this program's at all. Each
    frame's text is still checked against the file (`_frames`)."""
    if not files:
        return {}
    loaded = {os.path.abspath(sys.argv[0])} if sys.argv and sys.argv[0] else set()
    for module in list(sys.modules.values()):
        f = getattr(module, "__file__", None)
        if f:
            loaded.add(f)
            loaded.add(os.path.abspath(f))
    moved = {}
    for f in files - loaded:
        copy = _same_file_elsewhere(f, loaded)
        if copy is None:
            return None
        moved[f] = copy
    return moved


def _same_file_elsewhere(path, loaded):
    """The loaded file with the same name whose path ends the most like `path`'s (one with the
    same name and folder beats one with the same name only); None if none has its name."""
    parts = path.split(os.sep)
    best, best_len = None, 0
    for f in loaded:
        other = f.split(os.sep)
        n = 0
        while n < min(len(parts), len(other)) and parts[-1 - n] == other[-1 - n]:
            n += 1
        if n > best_len:
            best, best_len = f, n
    return best


def _warn_stale():
    global _stale_warned
    if not _stale_warned:
        _stale_warned = True
        _memprof.warn(
            "a compiled graph came from inductor's cache with the source lines of another "
            "program's compile of the same graph: its buffers are at the line that called it "
            "(a fresh TORCHINDUCTOR_CACHE_DIR gives their own lines)"
        )


def _frames(written):
    """A stack trace's frames (as `_FRAME` reads them, outermost first), innermost first, as
    (file, line, qualified name), each line checked against the file as it is now: a graph from
    inductor's cache keeps the traces of the compile that wrote it (they are not part of the
    cache key), so after an edit above a line its number is stale. A frame whose text moved is found by its text in its function;
    a chain with a frame that cannot be found is left out (its buffers stay at the caller)."""
    out = []
    for file, line, name, text in reversed(written):
        line = int(line)
        if text and linecache.getline(file, line).strip() != text.strip():
            line = _moved(file, line, name, text.strip())
            if line is None:
                return []
        out.append((file, line, _qualname(file, line, name)))
    return out


def _functions_named(file, name):
    """The functions of `file` that a stack trace's `name` may be, as (first line, last line,
    name, qualified name); the part of a function that dynamo resumes after a graph break is
    named as the function."""
    resumed = _RESUME.fullmatch(name)
    if resumed:
        name = resumed.group(1)
    functions = _functions.get(file)
    if functions is None:
        functions = _functions[file] = _read_functions(file)
    return [f for f in functions if f[2] == name]


def _moved(file, line, name, text):
    """Where the line `text` of function `name` is now (the nearest to `line`), or None."""
    found = [
        n
        for first, last, _, _ in _functions_named(file, name)
        for n in range(first, last + 1)
        if linecache.getline(file, n).strip() == text
    ]
    return min(found, key=lambda n: abs(n - line)) if found else None


def _qualname(file, line, name):
    """The qualified name of the function `name` around `line` of `file` (what a code object's
    co_qualname would say; stack traces give only the name)."""
    best = None
    for first, last, _, qualname in _functions_named(file, name):
        if first <= line <= last:
            if best is None or first >= best[0]:
                best = (first, qualname)
    return best[1] if best else name


def _read_functions(file):
    try:
        with open(file, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except Exception:
        return []
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = prefix + child.name
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out.append((first, child.end_lineno or child.lineno, child.name, qualname))
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out
