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
    that torch loads (the same .so files, found by name once torch has loaded them). A wheel
    built for another torch is named as such before its extension is loaded (loading it would
    fail on a missing libtorch symbol)."""
    global _module
    if _module is None:
        import torch

        running = torch.__version__.split("+")[0]
        where = os.path.dirname(torch.__file__)
        try:
            from . import _build
        except ImportError:  # a development checkout: the library cargo built
            _build = None
        if _build is None:
            module = _development_build()
        else:
            if running != _build.TORCH:
                from ._fit import wheel_for

                raise ImportError(
                    "this memprof wheel was built for torch %s, but this Python has torch %s (%s): "
                    "install %s" % (_build.TORCH, torch.__version__, where,
                                    wheel_for(_build.VERSION, running))
                )
            try:
                from . import _native as module
            except ImportError as e:
                raise ImportError(
                    "memprof's native core is installed but could not be loaded (%s): %s"
                    % (os.path.dirname(__file__), e)
                ) from e
        built = module.TORCH_VERSION
        if running != built:
            raise ImportError(
                "memprof's native core was built against torch %s, but this Python has torch %s "
                "(%s): rebuild memprof in this venv (scripts/setup.sh)"
                % (built, torch.__version__, where)
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
