"""The other `memprof`: PyPI's distribution of that name is an unrelated memory profiler (0.3.6,
2019) whose import package is also `memprof`. Installed beside torch-memprof, the two write into
the same folder and overwrite each other's files (pip does not check), so neither works as
itself. Its files, which torch-memprof never has, tell that it is there; then memprof stops with
one message naming the fix, instead of running half of one package and half of the other."""
import os

# Files of PyPI's `memprof` 0.2-0.3.6 in its package folder (memprof-0.3.6.tar.gz).
FOREIGN = ("memprof.py", "mp_utils.py")


def message():
    """(message, hint) when the other memprof's files share this package's folder, else None."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = [n for n in FOREIGN if os.path.exists(os.path.join(here, n))]
    if not found:
        return None
    return (
        "another package named memprof (PyPI's `memprof`, an unrelated profiler) is installed in "
        "%s, the folder of torch-memprof's `memprof`: the two overwrite each other's files"
        % here,
        "`pip uninstall -y memprof torch-memprof && pip install torch-memprof` (torch-memprof is "
        "this memprof; its command and `import memprof` stay the same)",
    )
