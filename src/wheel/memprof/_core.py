"""Loads memprof's native core, the `memprof._native` extension: the wheel's copy, or in a
development checkout the library cargo built (scripts/setup.sh points the venv at it)."""
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

_module = None


def native():
    """The extension, loaded once. torch is imported first: the extension links the libtorch
    that torch loads (the same .so files, found by name once torch has loaded them)."""
    global _module
    if _module is None:
        import torch

        try:
            from . import _native as module
        except ImportError:
            module = _development_build()
        built = module.TORCH_VERSION
        if torch.__version__.split("+")[0] != built:
            raise ImportError(
                "memprof's native core was built against torch %s, but this Python has torch %s "
                "(%s): install the memprof wheel built for it, or rebuild memprof in this venv"
                % (built, torch.__version__, os.path.dirname(torch.__file__))
            )
        _module = module
    return _module


def _development_build():
    """target/{debug,release}/libmemprof.so of this checkout (MEMPROF_NATIVE names another)."""
    path = os.environ.get("MEMPROF_NATIVE")
    if path is None:
        root = Path(__file__).resolve().parents[3]
        built = [root / "target" / kind / "libmemprof.so" for kind in ("debug", "release")]
        built = [p for p in built if p.is_file()]
        if not built:
            raise ImportError(
                "memprof's native core is not installed: install the memprof wheel, or in a "
                "checkout run scripts/setup.sh (it builds target/*/libmemprof.so)"
            )
        # The one cargo built last.
        path = str(max(built, key=lambda p: p.stat().st_mtime))
    loader = importlib.machinery.ExtensionFileLoader("memprof._native", path)
    spec = importlib.util.spec_from_file_location("memprof._native", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules["memprof._native"] = module
    return module
