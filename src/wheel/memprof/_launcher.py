"""`python -m memprof`, which the wheel's `memprof` command (the binary the wheel installs
beside the venv's python) runs for `run` and `--version`.

`memprof run` runs the script in this very interpreter (the user's python, at python's own
speed) with memprof's native core loaded as the `memprof._native` extension: the same code as
the command built from source, which embeds CPython instead. Every other command (`show`,
`merge`, `diff`, `plot`, `stats`, `completions`, `--help`) is the wheel's `memprof` binary, which
links neither libtorch nor Python and starts at once. Whatever `run` needs and this Python lacks
is named, with its fix (exit 2), before anything is loaded.

The run path imports as little as it can: the script should find the interpreter as
`python script.py` leaves it."""

import os
import sys

try:
    from . import _build
except ImportError:  # a development checkout: the package without the wheel's binary
    sys.stderr.write(
        "memprof: error: this memprof package has no command (a development checkout)\n"
        "hint: run target/release/memprof (scripts/setup.sh builds it), or install the wheel\n"
    )
    sys.exit(2)

USAGE = 2
# memprof's options that take a value and may come before the subcommand.
GLOBAL_VALUED = ("--device", "--stat")


class Missing(Exception):
    """What memprof needs and this Python lacks: a message and the line that says how to fix it."""

    def __init__(self, message, hint):
        super().__init__(message)
        self.message = message
        self.hint = hint


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


def check_python():
    running = "%d.%d" % sys.version_info[:2]
    if running != _build.PYTHON:
        raise Missing(
            "this memprof wheel runs Python %s, but it was started by Python %s (%s)"
            % (_build.PYTHON, running, sys.executable),
            "install the memprof wheel built for Python %s (its tag says cp%s)"
            % (running, running.replace(".", "")),
        )


def torch_dir():
    """The folder of the torch this Python would import (without importing it: the script does
    that), checked against the one memprof was built with."""
    import importlib.util

    from ._fit import wheel_for

    spec = importlib.util.find_spec("torch")
    want = "torch==%s" % _build.TORCH
    if spec is None or not spec.origin:
        raise Missing(
            "this Python (%s) has no torch; memprof needs torch %s, the version it was built with"
            % (sys.executable, _build.TORCH),
            "`%s -m pip install %s`" % (sys.executable, want),
        )
    root = os.path.dirname(spec.origin)
    version = "unknown"
    try:
        with open(os.path.join(root, "version.py")) as f:
            for line in f:
                if line.startswith("__version__"):
                    version = line.split("=", 1)[1].strip().strip("'\"")
                    break
    except OSError:
        pass
    if version.split("+")[0] != _build.TORCH:
        raise Missing(
            "the script's torch is %s (in %s), but this memprof wheel was built against libtorch %s"
            % (version, root, _build.TORCH),
            "install %s (the memprof wheel for this torch); memprof never changes your torch"
            % wheel_for(_build.VERSION, version),
        )
    lib = os.path.join(root, "lib")
    if _build.CUDA and not os.path.exists(os.path.join(lib, "libtorch_cuda.so")):
        raise Missing(
            "the script's torch (%s, in %s) is a CPU-only build, but this memprof wheel links "
            "libtorch_cuda" % (version, root),
            "install torch's CUDA build (`pip install %s` from PyPI), or build memprof from "
            "source in this venv (docs/install.md: Building from source)" % want,
        )
    return root


def load_native(torch_root):
    """The extension. It finds libtorch beside it in site-packages (its RUNPATH); a torch
    installed elsewhere has its libraries loaded first, by path, as the extension names them."""
    try:
        from . import _native
    except ImportError:
        import ctypes

        lib = os.path.join(torch_root, "lib")
        for name in ("libc10.so", "libtorch_cpu.so", "libc10_cuda.so", "libtorch_cuda.so",
                     "libtorch.so"):
            path = os.path.join(lib, name)
            if os.path.exists(path):
                ctypes.CDLL(path)
        from . import _native
    return _native


def run_here(args):
    try:
        check_python()
        root = torch_dir()
        native = load_native(root)
    except Missing as e:
        sys.stderr.write("memprof: error: %s\nhint: %s\n" % (e.message, e.hint))
        return USAGE
    except ImportError as e:
        sys.stderr.write(
            "memprof: error: memprof's native core could not be loaded: %s\n"
            "hint: reinstall the wheel (`pip install --force-reinstall memprof`)\n" % e
        )
        return USAGE
    # The interpreter as `python script.py` starts: not this command's folder first on
    # sys.path (memprof puts the script's there), and a `__main__` of the script's own.
    if not sys.flags.safe_path and sys.path:
        del sys.path[0]
    sys.modules["__main__"] = fresh_main(sys.modules["__main__"])
    native.cli(args, long_version())  # exits with the command's exit code


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


def long_version():
    return "%s\nPython %s (run: in the Python of the `memprof` command, %s)" % (
        _build.VERSION, _build.PYTHON, sys.executable)


def main():
    args = sys.argv[1:]
    command = subcommand(args)
    if command == "run":
        return run_here(args)
    if command is None and "--version" in args:
        # The binary would describe its own build; `run` is this Python's.
        print("memprof " + long_version())
        return 0
    binary = installed_binary()
    try:
        os.execv(binary, [binary] + args)
    except OSError as e:
        sys.stderr.write(
            "memprof: error: cannot run memprof's binary %s: %s\n"
            "hint: reinstall the wheel (`pip install --force-reinstall memprof`)\n"
            % (binary, e.strerror)
        )
        return USAGE


def installed_binary():
    """The wheel's binary: the `memprof` command itself, in this Python's scripts folder (or
    the user scheme's, for `pip install --user`)."""
    import sysconfig

    folders = [sysconfig.get_path("scripts")]
    try:
        folders.append(sysconfig.get_path("scripts", "%s_user" % os.name))
    except KeyError:
        pass
    for folder in folders:
        path = os.path.join(folder, "memprof")
        if os.path.isfile(path):
            return path
    return os.path.join(folders[0], "memprof")
