"""memprof, a line-level memory profiler for PyTorch programs.

- The `memprof` command (`memprof run -f train_step train.py`): see `memprof --help`; the wheel's
  command is started by _launcher.
- In your own Python: `memprof.profile` (a context manager and a decorator) gives a `Report`
  (api); `memprof.courtesy()` lends the GPU for a while (_courtesy); `%load_ext memprof` adds the `%memprof` and `%%memprof` magics (jupyter); the pytest
  plugin's `@pytest.mark.limit_device_memory("1.5 GiB")` fails a test over its GPU memory limit
  (pytest_plugin). All three run memprof's native core (the `memprof._native` extension) in the
  interpreter that imports them.
"""
from torch_memprof import conflict as _conflict

if _conflict():
    raise ImportError("memprof: %s (fix: %s)" % _conflict())

__all__ = ["Report", "profile", "courtesy", "Courtesy", "load_ipython_extension"]


def __getattr__(name):
    # Loaded when first used: the `memprof` command imports this package too, and a script it
    # runs should find the interpreter as `python script.py` leaves it.
    if name == "__version__":
        # Read when asked: importing importlib.metadata here would load modules into every
        # script that `memprof run` starts.
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("torch-memprof")
        except PackageNotFoundError:  # a development checkout without its dist-info
            return "dev"
    if name in ("profile", "Report"):
        from . import api

        return getattr(api, name)
    if name in ("courtesy", "Courtesy"):
        from . import _courtesy

        return getattr(_courtesy, name)
    raise AttributeError("module 'memprof' has no attribute %r" % name)


def load_ipython_extension(ipython):
    """`%load_ext memprof`: the `%memprof` and `%%memprof` magics."""
    from .jupyter import register

    register(ipython)
