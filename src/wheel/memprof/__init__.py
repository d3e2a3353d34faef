"""memprof, a line-level memory profiler for PyTorch programs. The wheel's Python part only starts
the binary (see _launcher); `memprof --help` says how to use it."""
from ._build import VERSION as __version__  # noqa: F401
