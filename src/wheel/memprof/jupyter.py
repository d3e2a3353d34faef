"""The IPython/Jupyter magics (`%load_ext memprof`):

    %memprof [-f NAME]... [--modules] [--tensors] [--stat KEY]... [--device D]
             [--history FILE] STATEMENT
    %%memprof [-f NAME]... [options]      (the cell's own lines are profiled, as `-f '<module>'`
                                           profiles a script's top-level lines)
    %memprof --every N -f NAME... STATEMENT   (pytorch_memlab's profile_every: a table per N calls
                                               of each named function while the statement runs)

Each gives a `memprof.Report`: a table in a terminal IPython, rich output in Jupyter. The
statement or cell runs in the notebook's namespace, in its process, on its GPU."""
import re

from .api import profile

# One option at the start of the line: a flag, or an option and its value.
_OPTION = re.compile(
    r"\s*(?:(--modules|--tensors)|(-f|--stat|--device|--every|--history)\s+(\S+))(?=\s|$)")
USAGE = (
    "usage: %memprof [-f NAME]... [--modules] [--tensors] [--stat KEY]... [--device D] "
    "[--history FILE] [--every N] STATEMENT"
    "\n       %%memprof [-f NAME]... [options]   (then the cell)"
)


def parse(line):
    """(profile's keyword arguments, the names of -f, the rest of the line)."""
    options = {"modules": False, "tensors": False, "stats": [], "device": None}
    names = []
    rest = line
    while True:
        m = _OPTION.match(rest)
        if m is None:
            break
        flag, option, value = m.groups()
        if flag:
            options[flag[2:]] = True
        elif option == "-f":
            names.append(value)
        elif option == "--stat":
            options["stats"].append(value)
        elif option == "--history":
            options["history"] = value
        elif option == "--every":
            if not value.isdigit() or int(value) < 1:
                raise ValueError("--every takes a number of calls, at least 1\n%s" % USAGE)
            options["every"] = int(value)
        else:
            options["device"] = value
        rest = rest[m.end():]
    rest = rest.strip()
    if rest.startswith("-"):
        raise ValueError("unknown option %r\n%s" % (rest.split()[0], USAGE))
    return options, names, rest


def register(ipython):
    from IPython.core.magic import Magics, line_cell_magic, magics_class

    @magics_class
    class MemprofMagics(Magics):
        @line_cell_magic
        def memprof(self, line, cell=None):
            try:
                options, names, rest = parse(line)
            except ValueError as e:
                print(e)
                return None
            shell = self.shell
            if cell is None:
                if not rest:
                    print(USAGE)
                    return None
                source, label, own = rest, "<%memprof>", False
            else:
                if rest:
                    print("%%memprof takes options only on its line; the cell is what runs\n"
                          + USAGE)
                    return None
                source, label, own = shell.transform_cell(cell), "<cell>", True
            # Registered with IPython's compiler, so that its text is in linecache (the
            # report's line contents) and tracebacks show it.
            filename = shell.compile.cache(source)
            code = compile(source, filename, "exec")
            if "every" in options:
                return _every(shell, code, names, options)
            targets = ([code] if own else []) + names
            session = profile(*targets, label=label, **options)
            report = session.__enter__()
            try:
                exec(code, shell.user_ns)
            except BaseException as e:
                session.__exit__(type(e), e, e.__traceback__)
                from IPython.display import display

                display(report)
                raise
            session.__exit__(None, None, None)
            return report

    ipython.register_magics(MemprofMagics)


def _every(shell, code, names, options):
    """`--every N`: each named function (a name in the notebook's namespace, or a dotted path
    to a method) replaced while the statement runs by `@memprof.profile(every=N)` of it; a
    group left open at the end is printed then. Returns the last group's report."""
    if not names:
        print("--every needs the functions whose calls it groups: -f NAME\n" + USAGE)
        return None
    patched = []
    try:
        for name in names:
            parts = name.split(".")
            owner, attr = None, parts[0]
            if attr not in shell.user_ns:
                raise ValueError("-f %s: no %r in the notebook's namespace" % (name, attr))
            value = shell.user_ns[attr]
            for part in parts[1:]:
                owner, attr, value = value, part, getattr(value, part)
            wrapped = profile(**options)(value)
            patched.append((owner, attr, value, wrapped))
            if owner is None:
                shell.user_ns[attr] = wrapped
            else:
                setattr(owner, attr, wrapped)
        exec(code, shell.user_ns)
    except ValueError as e:
        print(e)
        return None
    finally:
        for owner, attr, value, wrapped in reversed(patched):
            wrapped.memprof_close("the statement ended")
            if owner is None:
                shell.user_ns[attr] = value
            else:
                setattr(owner, attr, value)
    reports = [w.memprof_report for _, _, _, w in patched if w.memprof_report is not None]
    return reports[-1] if reports else None
