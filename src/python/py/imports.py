# memprof's one import hook helper, run inside the profiled interpreter: call a function with a
# module once the program has imported it (at once if it already has), without importing it
# earlier than the program would and without changing how it loads.
import importlib.abc
import importlib.machinery
import sys


def after_import(name, callback):
    """callback(module) when `name` is imported (now, if it is loaded)."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        callback(loaded)
        return

    class Finder(importlib.abc.MetaPathFinder):
        memprof_waits_for = name

        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None:
                return None
            real_exec = spec.loader.exec_module
            finder = self

            def exec_module(module):
                # Gone once the module is really loaded: a mere lookup
                # (importlib.util.find_spec) must not use it up.
                if finder in sys.meta_path:
                    sys.meta_path.remove(finder)
                real_exec(module)
                callback(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def clear():
    """Stops waiting for modules not imported yet (the end of an in-process session)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not hasattr(f, "memprof_waits_for")]
