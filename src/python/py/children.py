# memprof's following of the program's child processes, run inside the profiled interpreter
# (`memprof run`). A forked child (multiprocessing's fork start method: DataLoader's workers on
# Linux) is a copy of this process with memprof in it: at the fork it forgets what the parent
# measured, and when it leaves (multiprocessing's children leave through os._exit) it writes its
# own report into the children's folder. A spawned child (a fresh interpreter:
# torch.multiprocessing.spawn, a "spawn" context) runs a few lines first, added to its command
# line, that load memprof's native core into it and measure it as `memprof.profile` would, with
# the run's targets; or, where that cannot be done, write why. The parent reads the folder when
# the program ends (src/session/children.rs).
import os
import sys

import _memprof

_main_pid = None

# What a spawned child runs before multiprocessing's own start-up: it measures from the moment
# the child's main module is loaded (the targets in the script are found there) until it exits.
_SPAWN_BOOT = r'''
def _memprof_follow(native, argv, directory, parent, script):
    import atexit, json, os
    pid = os.getpid()
    out = os.path.join(directory, "child-%d.json" % pid)

    def write(doc):
        tmp = "%s.%d.tmp" % (out, pid)
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, out)

    def not_followed(why):
        write({"memprof_child": {"pid": pid, "start": "spawn", "not_followed": why}})

    if native is None:
        not_followed("memprof's native library (libmemprof.so, or the wheel's memprof._native) "
                     "is not installed beside the memprof that ran the program")
        return
    import multiprocessing.spawn as spawn
    real_prepare = spawn.prepare

    def prepare(data):
        spawn.prepare = real_prepare
        real_prepare(data)
        try:
            import importlib.machinery, importlib.util
            import torch  # the native core links the libtorch that torch loads
            loader = importlib.machinery.ExtensionFileLoader("memprof._native", native)
            spec = importlib.util.spec_from_file_location("memprof._native", native,
                                                          loader=loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            session = module.start(argv, [], script, True)
        except BaseException as e:
            not_followed("%s: %s" % (type(e).__name__, e))
            return

        def stop():
            try:
                report = json.loads(session.stop(None))
                # The run's targets that never ran here: the parent's report says which never
                # ran anywhere.
                report["warnings"] = [w for w in report.get("warnings", [])
                                      if not w.endswith("but never ran")]
                report["metadata"]["process"]["child"] = {"parent": parent, "start": "spawn"}
                write(report)
            except BaseException as e:
                not_followed("its report could not be made: %s: %s" % (type(e).__name__, e))

        atexit.register(stop)
        import signal
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            # Killed at python's default action (a Pool's terminate()): the report so far
            # first, then death by SIGTERM as before.
            session.write_on_sigterm(out, parent)

    spawn.prepare = prepare
'''


def install(directory, child_argv, script):
    """Follows the children of this process: forked ones at once, spawned ones from the first
    use of multiprocessing's spawn start method; forkserver's are named as not followed.
    `script`: how the report names the program."""
    global _main_pid
    _main_pid = os.getpid()
    os.register_at_fork(after_in_child=_forked)
    boot = os.path.join(directory, "spawn_boot.py")
    with open(boot, "w") as f:
        f.write(_SPAWN_BOOT)
        f.write("_memprof_follow(%r, %r, %r, %d, %r)\ndel _memprof_follow\n" % (
            _memprof.native_library(), list(child_argv), directory, _main_pid, script))
    import _memprof_imports

    _memprof_imports.after_import("multiprocessing.spawn", lambda m: _follow_spawn(m, boot))
    _memprof_imports.after_import("multiprocessing.popen_forkserver",
                                  lambda m: _name_forkserver_children(m, directory))


def is_child():
    """Whether this process is a forked copy of the one that ran the program."""
    return _main_pid is not None and os.getpid() != _main_pid


def _forked():
    try:
        _memprof.forked()
    except BaseException:
        pass
    # SIGINT as python leaves it in a child: memprof's handler, copied by the fork, would hand a
    # second Ctrl-C to ctrlc's thread, which the child does not have; Python's own raises
    # KeyboardInterrupt here.
    import signal
    try:
        handler = signal.getsignal(signal.SIGINT)
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):
        pass
    # The parent's files are the parent's to write.
    history = sys.modules.get("_memprof_history")
    if history is not None:
        history._written = True


def _follow_spawn(spawn, boot):
    real = spawn.get_command_line
    prefix = "exec(compile(open(%r).read(), '<memprof child>', 'exec'))\n" % boot

    def get_command_line(**kwds):
        cmd = real(**kwds)
        if "-c" in cmd:
            cmd = list(cmd)
            i = cmd.index("-c") + 1
            cmd[i] = prefix + cmd[i]
        return cmd

    get_command_line.__wrapped__ = real
    spawn.get_command_line = get_command_line


def _name_forkserver_children(popen_forkserver, directory):
    """forkserver's children (Python 3.14's default start method on Linux) are forked from a
    server process memprof does not run: each is named in the report as not followed."""
    real_launch = popen_forkserver.Popen._launch

    def _launch(self, process_obj):
        real_launch(self, process_obj)
        try:
            import json

            out = os.path.join(directory, "child-%d.json" % self.pid)
            with open(out, "w") as f:
                json.dump({"memprof_child": {
                    "pid": self.pid, "start": "forkserver",
                    "not_followed": "memprof follows fork and spawn children, not forkserver's: "
                                    "start them with multiprocessing_context='spawn' (or 'fork')",
                }}, f)
        except Exception:
            pass

    _launch.__wrapped__ = real_launch
    popen_forkserver.Popen._launch = _launch
