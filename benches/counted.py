"""The counted benches' marks (benches/counted.sh runs them under callgrind): `counted(mode, step,
steps)` runs `step` 3 times uncounted (`warmup`), then `steps` times between benches/counted.c's
marks (built here with cc), which dump the counts of what ran between them under `mode`; Python's garbage
collector is off while they run (when it runs depends on how many objects were made since it
last ran, which moved the counts by a quarter from run to run). Outside valgrind the marks do
nothing."""
import ctypes
import gc
import os
import subprocess
import tempfile

_here = os.path.dirname(os.path.abspath(__file__))
_lib = os.path.join(tempfile.mkdtemp(), "memprof_counted.so")
subprocess.run(["cc", "-O1", "-shared", "-fPIC", os.path.join(_here, "counted.c"), "-o", _lib],
               check=True)
_marks = ctypes.PyDLL(_lib)


def counted(mode, step, steps, warmup=3):
    for _ in range(warmup):
        step()
    gc.collect()
    gc.disable()
    _marks.memprof_counted_begin()
    for _ in range(steps):
        step()
    _marks.memprof_counted_end(mode.encode())
    gc.enable()
