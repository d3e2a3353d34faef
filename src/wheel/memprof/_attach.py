"""What `memprof attach PID` runs inside the program, through `sys.remote_exec` (PEP 768,
Python 3.14+): `start` begins a session from that moment (what was live before is its own row of
the peak), answers `memprof snapshot PID` and `memprof live PID` on the socket the command
names, and writes the report where the command reads it when `stop` runs (the command's second
`sys.remote_exec`) or, if the program ends first, when it exits. The command and this module
speak through files in a folder of the command's (crates/report/src/commands/attach.rs): the
request (JSON), the status (`started`, `stopped` or `error: ...`) and the report (JSON)."""
import atexit
import json
import os
import sys

_attached = None


def _write(path, text):
    """`text` to `path` whole (a temporary file renamed over it): the command never reads half."""
    partial = path + ".partial"
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, path)


def start(request_path):
    """Starts measuring as the request at `request_path` asks; says how it went in its status
    file. Never raises into the program: a failure is the status's, and the program runs on."""
    global _attached
    request = json.load(open(request_path))
    status = request["status"]
    try:
        if _attached is not None:
            raise RuntimeError("memprof is already attached to this process")
        if "torch" not in sys.modules:
            # Importing it here would change the program; it has nothing to measure yet.
            raise RuntimeError("the program has not imported torch")
        running = sys.modules.get("_memprof")
        if running is not None and not getattr(running, "in_process", False):
            raise RuntimeError("`memprof run` already profiles this process")
        from ._core import native

        session = native().start(request["argv"], [], request["label"], True,
                                 request["command"])
        try:
            session.serve(request["socket"])
        except BaseException:
            session.stop(None)
            raise
        _attached = (session, request)
        atexit.register(_at_exit)
        _write(status, "started\n")
    except BaseException as e:  # noqa: BLE001 (the program must run on whatever happened)
        _write(status, "error: %s: %s\n" % (type(e).__name__, e))


def stop(request_path):
    """Stops measuring: the report goes to the request's report file, then the status says
    `stopped`."""
    request = json.load(open(request_path))
    if _attached is None:
        _write(request["status"], "error: memprof is not attached to this process\n")
        return
    atexit.unregister(_at_exit)
    _finish("stopped")


def _at_exit():
    """The program ends while memprof is attached: its report still reaches the command."""
    _finish("stopped: the program ended")


def _finish(how):
    global _attached
    session, request = _attached
    _attached = None
    try:
        _write(request["report"], session.stop(None))
        _write(request["status"], how + "\n")
    except BaseException as e:  # noqa: BLE001
        _write(request["status"], "error: %s: %s\n" % (type(e).__name__, e))
