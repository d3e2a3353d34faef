"""The wheel's `memprof` command: finds the libpython and the libtorch of the Python that runs it,
then runs memprof's binary with them. Whatever cannot be found is named, with its fix (exit 2),
before the loader could fail on it.

The binary links libpython and libtorch. Neither lives where the loader looks by default (a
venv's torch/lib; pyenv's, uv's or conda's lib), so they are put on LD_LIBRARY_PATH for the
binary only: it gives the script back the environment it had (see src/python/launcher.rs)."""

import importlib.util
import os
import re
import sys
import sysconfig
from pathlib import Path

from . import _build

USAGE = 2
BINARY = Path(__file__).resolve().parent / "bin" / "memprof"
# Directories the loader searches anyway: left off LD_LIBRARY_PATH, where they would come before
# the RUNPATHs of the libraries the script loads later.
DEFAULT_DIRS = {"/lib", "/usr/lib", "/lib64", "/usr/lib64"}
MULTIARCH = sysconfig.get_config_var("MULTIARCH")
if MULTIARCH:
    DEFAULT_DIRS |= {"/lib/" + MULTIARCH, "/usr/lib/" + MULTIARCH}


class Missing(Exception):
    """What memprof needs and this Python lacks: a message and the line that says how to fix it."""

    def __init__(self, message, hint):
        super().__init__(message)
        self.message = message
        self.hint = hint


def python_kind():
    """The kind of Python installation this is, for the fixes memprof suggests."""
    base = Path(sys.base_prefix)
    if (base / "conda-meta").is_dir():
        return "conda"
    if ".pyenv" in base.parts:
        return "pyenv"
    if "--prefix=/install" in (sysconfig.get_config_var("CONFIG_ARGS") or ""):
        return "python-build-standalone"  # uv's and rye's Pythons
    if str(base) in ("/usr", "/usr/local") and Path("/etc/debian_version").exists():
        return "debian"
    return "other"


def check_python():
    running = "%d.%d" % sys.version_info[:2]
    if running != _build.PYTHON:
        raise Missing(
            "this memprof wheel runs Python %s, but it was started by Python %s (%s)"
            % (_build.PYTHON, running, sys.executable),
            "install the memprof wheel built for Python %s (its tag says cp%s)"
            % (running, running.replace(".", "")),
        )


def libpython_dir():
    """The directory that holds this Python's libpython3.X.so.1.0."""
    name = "libpython%s.so.1.0" % _build.PYTHON
    multiarch = MULTIARCH or ""
    candidates = [
        sysconfig.get_config_var("LIBDIR"),
        os.path.join(sys.base_prefix, "lib"),
        os.path.join("/usr/lib", multiarch),
        os.path.join("/lib", multiarch),
        "/usr/lib64",
        "/usr/lib",
    ]
    for d in candidates:
        if d and os.path.isfile(os.path.join(d, name)):
            return os.path.normpath(d)
    kind = python_kind()
    hint = {
        "debian": "install the package that has it: `sudo apt install libpython%s`" % _build.PYTHON,
        "pyenv": "reinstall this Python with a shared libpython: "
        "`env PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install --force %s`"
        % ".".join(map(str, sys.version_info[:3])),
        "conda": "`conda install python=%s` (conda's Python ships libpython)" % _build.PYTHON,
        "python-build-standalone": "reinstall this Python (`uv python install --reinstall %s`): "
        "its lib/ should hold %s" % (_build.PYTHON, name),
    }.get(
        kind,
        "use a Python built with --enable-shared (Debian/Ubuntu: `apt install libpython%s`)"
        % _build.PYTHON,
    )
    raise Missing(
        "memprof embeds this Python through %s, which is not in %s (a %s Python)"
        % (name, sysconfig.get_config_var("LIBDIR") or sys.base_prefix, kind),
        hint,
    )


def torch_lib_dir():
    """torch/lib of the torch this Python would import, checked against the one memprof links."""
    spec = importlib.util.find_spec("torch")
    want = "torch==%s" % _build.TORCH
    if spec is None or not spec.origin:
        raise Missing(
            "this Python (%s) has no torch; memprof needs torch %s, the version it was built with"
            % (sys.executable, _build.TORCH),
            "`%s -m pip install %s`" % (sys.executable, want),
        )
    root = Path(spec.origin).parent
    version = "unknown"
    try:
        text = (root / "version.py").read_text()
        found = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.M)
        if found:
            version = found.group(1)
    except OSError:
        pass
    if version.split("+")[0] != _build.TORCH:
        raise Missing(
            "the script's torch is %s (in %s), but this memprof wheel was built against libtorch %s"
            % (version, root, _build.TORCH),
            "install the memprof wheel built for torch %s, or `pip install %s`"
            % (version.split("+")[0], want),
        )
    lib = root / "lib"
    if _build.CUDA and not (lib / "libtorch_cuda.so").exists():
        raise Missing(
            "the script's torch (%s, in %s) is a CPU-only build, but this memprof wheel links "
            "libtorch_cuda" % (version, root),
            "install torch's CUDA build (`pip install %s` from PyPI), or build memprof from "
            "source in this venv (docs/install.md: Building from source)" % want,
        )
    return str(lib)


def main():
    try:
        check_python()
        dirs = [torch_lib_dir(), libpython_dir()]
    except Missing as e:
        sys.stderr.write("memprof: error: %s\nhint: %s\n" % (e.message, e.hint))
        return USAGE
    old = os.environ.get("LD_LIBRARY_PATH")
    env = dict(os.environ)
    env["MEMPROF_LAUNCHER_PYTHON"] = sys.executable
    env["MEMPROF_LAUNCHER_LD_LIBRARY_PATH"] = "unset" if old is None else "set:" + old
    path = [d for d in dict.fromkeys(dirs) if d not in DEFAULT_DIRS]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(path + ([old] if old else []))
    try:
        os.execve(str(BINARY), [str(BINARY)] + sys.argv[1:], env)
    except OSError as e:
        sys.stderr.write(
            "memprof: error: cannot run memprof's binary %s: %s\n"
            "hint: reinstall the wheel (`pip install --force-reinstall memprof`)\n"
            % (BINARY, e.strerror)
        )
        return USAGE
