"""Loads memprof's native core, the `memprof._native` extension (the wheel's, or in a development
checkout the library cargo built: scripts/setup.sh points the venv at it), and binds it to the
torch this Python imports: the core loads memprof's library built for that torch release (one
per supported release in the wheel), or says which releases it supports."""
import os
import sys

_module = None
_bound = False
HERE = os.path.dirname(os.path.abspath(__file__))


def native_module():
    """The extension, loaded once, not yet bound to a torch (the commands that only read reports
    need none)."""
    global _module
    if _module is None:
        try:
            from . import _native as module
        except ImportError as e:
            if any(n.startswith("_native.") for n in os.listdir(HERE)):
                raise ImportError(
                    "memprof's native core is installed but could not be loaded (%s): %s; "
                    "reinstall it (`pip install --force-reinstall torch-memprof`)" % (HERE, e)
                ) from e
            module = _development_build()
        _module = module
    return _module


def native():
    """The extension, bound to this Python's torch (imported here if the program has not yet)."""
    global _bound
    module = native_module()
    if not _bound:
        import torch

        try:
            module.load_torch(os.path.dirname(torch.__file__), torch.__version__)
        except ValueError as e:
            raise ImportError("memprof: %s" % e) from None
        _bound = True
    return module


def _development_build():
    """target/{debug,release}/libmemprof.so of this checkout (MEMPROF_NATIVE names another)."""
    # Imported here: the installed command's start-up needs none of them.
    import importlib.machinery
    import importlib.util
    from pathlib import Path

    path = os.environ.get("MEMPROF_NATIVE")
    if path is None:
        root = Path(__file__).resolve().parents[3]
        built = [root / "target" / kind / "libmemprof.so" for kind in ("debug", "release")]
        built = [p for p in built if p.is_file()]
        if not built:
            raise ImportError(
                "memprof's native core is not installed: `pip install torch-memprof`, or in a "
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
