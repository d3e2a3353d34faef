"""The `memprof` command of the installed package (its console script) and `python -m memprof`.

Every command runs in this interpreter through memprof's native core (the `memprof._native`
extension), which links neither libtorch nor libpython: `show`, `merge`, `diff`, `plot`,
`stats`, `completions` and `--help` start without torch. `memprof run` runs the script in this
very interpreter (the user's python, at python's own speed) as `__main__`, the same code as the
command built from source, which embeds CPython instead; the core finds the torch the script
will import and loads memprof's library for that release before the script starts, or names
what is missing (exit 2).

The run path imports as little as it can: the script should find the interpreter as
`python script.py` leaves it."""

import sys

USAGE = 2
# memprof's options that take a value and may come before the subcommand.
GLOBAL_VALUED = ("--device", "--stat")


def subcommand(args):
    """The subcommand that `args` (memprof's, without the program name) ask for, if any."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in GLOBAL_VALUED:
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return a
    return None


def main():
    """The command (after torch_memprof.main's check for the other `memprof`)."""
    args = sys.argv[1:]
    try:
        from ._core import native_module

        native = native_module()
    except ImportError as e:
        sys.stderr.write(
            "memprof: error: memprof's native core could not be loaded: %s\n"
            "hint: reinstall it (`pip install --force-reinstall torch-memprof`)\n" % e
        )
        return USAGE
    if subcommand(args) == "run":
        global COMMAND_FILES
        COMMAND_FILES = _files_on_the_stack()
        # The interpreter as `python script.py` starts: not this command's folder first on
        # sys.path (memprof puts the script's there), and a `__main__` of the script's own.
        if not sys.flags.safe_path and sys.path:
            del sys.path[0]
        sys.modules["__main__"] = fresh_main(sys.modules["__main__"])
    native.cli(args, long_version(native))  # exits with the command's exit code


# The files of the frames that run `memprof run` here (pip's console script, torch_memprof.py,
# this one, runpy's for `-m memprof`): the script runs above them, and its allocations' sites
# must not name them as the program's context (src/python/py/peak.py reads this).
COMMAND_FILES = ()


def _files_on_the_stack():
    files, frame = [], sys._getframe()
    while frame is not None:
        if not frame.f_code.co_filename.startswith("<"):
            files.append(frame.f_code.co_filename)
        frame = frame.f_back
    return tuple(files)


def fresh_main(launcher_main):
    """A `__main__` module as python's start-up makes one (pylifecycle's add_main_module), for
    the script in place of this launcher's (which `-m memprof` ran): its name, no doc, package,
    spec, `__builtins__` (the builtins module: warnings, typing and pickle look it up there),
    the loader of a module not yet run, and `__annotations__` where this Python starts with it
    (3.11 to 3.13). The runner then adds `__file__`, `__cached__` and the script's loader, as
    python's own file runner does."""
    import builtins
    import types
    from importlib.machinery import BuiltinImporter

    main = types.ModuleType("__main__")
    main.__loader__ = BuiltinImporter
    if "__annotations__" in vars(launcher_main):
        main.__annotations__ = {}
    main.__builtins__ = builtins
    return main


def long_version(native):
    return "%s\nPython %s (run: in the Python of the `memprof` command, %s)" % (
        native.VERSION, native.PYTHON_VERSION, sys.executable)
