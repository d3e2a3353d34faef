"""torch-memprof's own top-level module: the `memprof` command's entry point (pip's console
script), and the check for the other `memprof`.

PyPI's distribution `memprof` is an unrelated memory profiler (0.3.6, 2019) whose import package
is also `memprof`. Installed beside torch-memprof, the two write into the same folder and
overwrite each other's files (pip does not check), so neither works as itself; its
`memprof/__init__.py` may be the one there, and it fails on import. Its files, which
torch-memprof never has, tell that it is there. This module lives outside the `memprof` package
so that the command can say so before anything of that package runs; `import memprof` checks
the same (memprof/__init__.py)."""
import os
import sys

# Files of PyPI's `memprof` 0.2-0.3.6 in its package folder (memprof-0.3.6.tar.gz).
FOREIGN = ("memprof.py", "mp_utils.py")
PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memprof")


def conflict():
    """(message, hint) when the other memprof's files share the `memprof` folder beside this
    module, else None."""
    found = [n for n in FOREIGN if os.path.exists(os.path.join(PACKAGE, n))]
    if not found:
        return None
    return (
        "another package named memprof (PyPI's `memprof`, an unrelated profiler) is installed in "
        "%s, the folder of torch-memprof's `memprof`: the two overwrite each other's files"
        % PACKAGE,
        "`pip uninstall -y memprof torch-memprof && pip install torch-memprof` (torch-memprof is "
        "this memprof; its command and `import memprof` stay the same)",
    )


def main():
    """The `memprof` command."""
    found = conflict()
    if found:
        sys.stderr.write("memprof: error: %s\nhint: %s\n" % found)
        return 2
    from memprof._launcher import main as launch

    return launch()


if __name__ == "__main__":
    sys.exit(main())
