"""Which memprof wheel fits a Python and a torch: the file name that a mismatch message tells the
user to install, as scripts/make_wheel.py names wheels (one per CPython minor version and torch
minor release)."""
import sys


def wheel_for(memprof_version, torch_version):
    """The name of the wheel of this memprof version for the running Python and `torch_version`."""
    minor = ".".join(torch_version.split("+")[0].split(".")[:2])
    py = "cp%d%d" % sys.version_info[:2]
    return "memprof-%s+torch%s-%s-%s-linux_x86_64.whl" % (memprof_version, minor, py, py)
