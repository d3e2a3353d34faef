"""`memprof.profile`: memprof in your own Python. A context manager or a decorator that measures
what runs inside it with the command's native core, and the `Report` it gives: the same report
`memprof run` writes (the same schema, read by `memprof show/diff/merge/plot`)."""
import atexit
import functools
import html
import json
import os
import sys

from ._core import native


def _split(targets):
    """(`-f`-style names, callables) of `profile`'s targets."""
    names = [t for t in targets if isinstance(t, str)]
    return names, [t for t in targets if not isinstance(t, str)]


class profile:
    """Measures what runs inside it, as `memprof run` measures a script.

        with memprof.profile(train_step, modules=True) as report:
            train_step(model, batch)
        print(report.table())

        @memprof.profile()
        def train_step(model, batch): ...
        train_step(model, batch); train_step.memprof_report.peak

    targets: functions (their lines get the command's table) and `-f`-style names (`train_step`,
    `Net.forward`, `pkg.mod:fn`, `'<module>'` is not one: use the `%%memprof` magic). Without
    targets the report still has the peak: what held memory at the block's high-water mark, by
    line. modules: a row per torch.nn.Module call (`--modules`); tensors: the live tensors when
    a targeted call ends (`--tensors`); stats: the columns, as torch.cuda.memory_stats() names
    them; device: a CUDA index or "cpu" (default: the current CUDA device, or the CPU);
    categories: the scan of the live objects when the block ends that names what is still live
    (parameters, buffers, gradients, optimizer state; what no tensor holds: workspaces). False
    skips it, for a cheaper session: what was freed before the end keeps its category, what is
    still live and not named while it lived is `other`. history: a file to write, when the
    session stops, the allocation history that PyTorch's memory_viz opens (`--history`:
    torch's own on CUDA, Python stacks inside the targeted calls only), history_max_entries
    how many events it keeps (default 100000).
    In a `with` block, warmup=W and calls=M schedule the targets' calls as the command's
    --warmup and --calls do (the first W calls of each unmeasured, then M measured, then
    nothing: the hooks come off). As a decorator: every=N measures the calls N at a time (one
    session over N calls: each line's hits and Δ summed over them, its peaks the highest) and
    prints each group's table, as pytorch_memlab's `profile_every(N)` does; warmup=W leaves the
    first W calls unmeasured and calls=M stops after M measured calls, as the command's
    --warmup and --calls do.
    One session at a time: they do not nest (a group of every=N is one session until its Nth
    call)."""

    def __init__(self, *targets, modules=False, tensors=False, stats=None, device=None,
                 categories=True, label="<python>", every=None, warmup=0, calls=None,
                 history=None, history_max_entries=None):
        self._names, self._callables = _split(targets)
        self._targets = targets
        if history is not None and not isinstance(history, (str, os.PathLike)):
            raise TypeError("memprof.profile(history=%r): a file's path (the pickle to write)"
                            % (history,))
        self._options = dict(modules=modules, tensors=tensors, stats=stats, device=device,
                             categories=categories, history=history,
                             history_max_entries=history_max_entries)
        self._label = label
        self._session = None
        self._report = None
        for name, value, least in (("every", every, 1), ("warmup", warmup, 0), ("calls", calls, 1)):
            if value is not None and (not isinstance(value, int) or value < least):
                raise ValueError("memprof.profile(%s=%r): a whole number of calls, at least %d"
                                 % (name, value, least))
        self._schedule = (every, warmup or 0, calls)

    def _argv(self):
        o = self._options
        argv = []
        if o["device"] is not None:
            argv += ["--device", str(o["device"])]
        stats = o["stats"]
        if isinstance(stats, str):
            stats = [stats]
        for s in stats or ():
            argv += ["--stat", s]
        argv.append("run")
        for name in self._names:
            argv += ["-f", name]
        if o["modules"]:
            argv.append("--modules")
        if o["tensors"]:
            argv.append("--tensors")
        if o["history"] is not None:
            argv += ["--history", os.path.abspath(os.fspath(o["history"]))]
        if o["history_max_entries"] is not None:
            argv += ["--history-max-entries", str(o["history_max_entries"])]
        _every, warmup, calls = self._schedule
        if warmup:
            argv += ["--warmup", str(warmup)]
        if calls is not None:
            argv += ["--calls", str(calls)]
        return argv

    def __enter__(self):
        if self._schedule[0] is not None:
            raise TypeError("memprof.profile(every=) groups a decorated function's calls; a "
                            "`with` block runs once (warmup= and calls= schedule its targets' "
                            "calls, as the command's --warmup and --calls)")
        running = sys.modules.get("_memprof")
        if running is not None and not getattr(running, "in_process", False):
            raise RuntimeError(
                "`memprof run` is already profiling this program, and memprof.profile does not "
                "run inside it: name the targets with -f instead, or run the program with python")
        self._report = Report()
        self._session = native().start(self._argv(), self._callables, self._label,
                                       self._options["categories"])
        return self._report

    def __exit__(self, exc_type, exc, tb):
        session, self._session = self._session, None
        raised = None if exc_type is None else "%s: %s" % (exc_type.__name__, exc)
        self._report._fill(session.stop(raised), session.allocated_at_start,
                           session.peak_above_start)
        return False

    def __call__(self, func):
        """As a decorator (`@memprof.profile()`): each call of `func` is measured, `func`
        targeted; the latest call's report is `func.memprof_report`."""
        if not callable(func):
            raise TypeError("@memprof.profile() decorates a function")
        running = sys.modules.get("_memprof")
        boot = sys.modules.get("_memprof_bootstrap")
        if running is not None and not getattr(running, "in_process", False) and boot is not None:
            # Under `memprof run` (which already profiles the program): as `@profile`, the
            # function and its callable targets join the run's targets, and the run's report
            # has their lines; after each call `memprof_report` is the run's report so far
            # (one recorder per process: a call has no session of its own).
            for target in (func,) + self._targets:
                if callable(target):
                    boot._profile_decorator(target)

            every = self._schedule[0]
            seen = [0]

            @functools.wraps(func)
            def in_the_run(*args, **kwargs):
                result = func(*args, **kwargs)
                seen[0] += 1
                text = running.report_so_far()
                if text is not None:
                    report = Report()
                    report._fill(text, None, None)
                    in_the_run.memprof_report = report
                    if every is not None and seen[0] % every == 0:
                        # One recorder per process: the run's lines so far, since its start.
                        _print_group(func, 1, seen[0], report, "so far in this memprof run")
                return result

            in_the_run.memprof_report = None
            return in_the_run
        targets = (func,) + self._targets
        options = self._options
        if self._schedule != (None, 0, None):
            return _grouped(func, targets, options, self._label, *self._schedule)

        @functools.wraps(func)
        def measured(*args, **kwargs):
            with profile(*targets, label=self._label, **options) as report:
                result = func(*args, **kwargs)
            measured.memprof_report = report
            return result

        measured.memprof_report = None
        return measured


def _print_group(func, first, last, report, note=""):
    """A group's table, with a line saying which calls it measured."""
    print("memprof: %s, call%s %s%s" % (
        func.__qualname__, "" if first == last else "s",
        first if first == last else "%d–%d" % (first, last), " (%s)" % note if note else ""))
    print(report.table())
    sys.stdout.flush()


def _grouped(func, targets, options, label, every, warmup, calls):
    """`func` measured `every` calls at a time (or, without every, the `calls` calls after
    `warmup` as one group), each group one session; a group left open when the program ends is
    closed and printed then."""
    state = {"seen": 0, "measured": 0, "session": None, "report": None, "first": 0}

    def close(raised=None, note=""):
        session = state["session"]
        state["session"] = None
        session.__exit__(*(raised or (None, None, None)))
        grouped.memprof_report = state["report"]
        if every is not None:
            if raised:
                note = "ended by %s" % raised[0].__name__
            _print_group(func, state["first"], state["seen"], state["report"], note)

    def at_exit(note="the program ended"):
        if state["session"] is not None:
            close(note=note)

    @functools.wraps(func)
    def grouped(*args, **kwargs):
        state["seen"] += 1
        done = calls is not None and state["measured"] >= calls
        if state["seen"] <= warmup or done:
            return func(*args, **kwargs)
        if state["session"] is None:
            state["session"] = profile(*targets, label=label, **options)
            state["report"] = state["session"].__enter__()
            state["first"] = state["seen"]
        try:
            result = func(*args, **kwargs)
        except BaseException:
            close(sys.exc_info())
            raise
        state["measured"] += 1
        in_group = state["seen"] - state["first"] + 1
        if (every is not None and in_group == every) or (
                calls is not None and state["measured"] >= calls):
            close()
        return result

    grouped.memprof_report = None
    # Closes a group still open (the notebook magic's end; the program's end calls it too).
    grouped.memprof_close = at_exit
    atexit.register(at_exit)
    return grouped


class Report:
    """One session's report: the command's report (`to_dict()`; `save` writes what `memprof
    show/diff/merge/plot` read), a table (`table()`, `print(report)`), rich output in Jupyter."""

    def __init__(self):
        self._text = None
        self._data = None
        self.allocated_at_start = None
        self._peak_above_start = None

    def _fill(self, text, allocated_at_start, peak_above_start):
        self._text = text
        self._data = json.loads(text)
        self.allocated_at_start = allocated_at_start
        self._peak_above_start = peak_above_start

    def _ready(self):
        if self._data is None:
            raise RuntimeError("the report is ready when the profiled block ends")
        return self._data

    @property
    def peak(self):
        """The peak explanation: allocated_bytes.all.current at its highest while the session
        ran, counting what was allocated before it and still live (its own row among the sites),
        and what held it (sites by line, categories); None when nothing was allocated."""
        return self._ready().get("peak")

    @property
    def peak_above_start(self):
        """What the session added: the most bytes that what it allocated held at once. It does
        not depend on what was live before (`allocated_at_start`): with nothing of that freed
        during the session, it is `peak["allocated_bytes"] - allocated_at_start`."""
        self._ready()
        return self._peak_above_start

    @property
    def metadata(self):
        """What measured: memprof's and torch's versions, the device, the stats shown."""
        return self._ready()["metadata"]

    @property
    def functions(self):
        """The targeted functions, each with its lines and their stats."""
        return self._ready().get("functions", [])

    @property
    def modules(self):
        return self._ready().get("modules")

    @property
    def warnings(self):
        return self._ready().get("warnings", [])

    def function(self, qualname):
        """The targeted function named `qualname` (or ending with `.qualname`)."""
        for f in self.functions:
            q = f["qualname"]
            if q == qualname or q.endswith("." + qualname):
                return f
        raise KeyError("no targeted function %r in this report (%s)" % (
            qualname, ", ".join(f["qualname"] for f in self.functions) or "none"))

    def to_dict(self):
        """The report as the command writes it in JSON (a fresh copy)."""
        self._ready()
        return json.loads(self._text)

    def save(self, path):
        """Writes the report: JSON (.json), YAML (.yaml, .yml), the table (.txt) or the
        interactive page (.html, .htm), as `memprof run -o` does."""
        self._ready()
        path = os.fspath(path)
        ext = os.path.splitext(path)[1].lower()
        formats = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".txt": "table",
                   ".html": "html", ".htm": "html"}
        if ext not in formats:
            raise ValueError(
                "save a report as .json, .yaml, .yml, .txt or .html, not %r" % path)
        text = self._text if ext == ".json" else native().render(self._text, formats[ext])
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)

    def table(self, width=None):
        """The command's table (for a terminal `width` columns wide; None: whole)."""
        self._ready()
        return native().render(self._text, "table", width)

    def __str__(self):
        return self.table()

    def __repr__(self):
        if self._data is None:
            return "<memprof.Report: measuring>"
        peak = self.peak
        return "<memprof.Report: %d function(s), peak %s B>" % (
            len(self.functions), peak["allocated_bytes"] if peak else 0)

    def _repr_pretty_(self, p, cycle):
        p.text(self.table() if self._data is not None else repr(self))

    def _repr_html_(self):
        if self._data is None:
            return None
        return '<pre class="memprof-report">%s</pre>' % html.escape(self.table())
