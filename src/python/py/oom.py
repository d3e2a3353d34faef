# memprof's out-of-memory forensics, run inside the profiled interpreter, always on.
#
# Once the program initialises CUDA, memprof attaches an observer to the CUDA caching allocator
# (torch's own `_cuda_attach_out_of_memory_observer`, which the allocator calls after releasing
# its lock and before it raises torch.OutOfMemoryError). At that moment the failing line's frames
# and every tensor are still alive: the observer records the requested bytes, the device's total
# and free memory as the allocator saw them (and the process's cap), allocated/reserved bytes, the largest free block,
# the Python stack, the live tensors (the --tensors scan) and the modules running. Nothing runs
# until an OOM happens. An OutOfMemoryError that reaches the top without the allocator having
# seen it (raised by Python code, or on the CPU) is recorded there, from its traceback and
# message. The observer never raises into the allocator and never allocates device memory.
import gc
import os
import re
import sys
import threading
import time

import _memprof

# Detailed records kept: the first few, and always the latest (the one that may end the run).
MAX_EVENTS = 3
# The live-tensor scans at OOM time stop once they have taken this long in all.
SCAN_BUDGET_S = 10.0
# Frames kept per stack (innermost ones).
MAX_FRAMES = 40

_options = None  # the run's Options (src/python/runner.rs), set by install
_events = []
_latest = None
_count = 0
_scan_seconds = 0.0
_attached = False


def install(options):
    """Called once before the script runs: watch for the program's CUDA initialisation."""
    global _options
    _options = options
    import _memprof_imports

    _memprof_imports.after_import("torch", _on_torch)


def _on_torch(torch):
    attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
    lazy = getattr(getattr(torch, "cuda", None), "_lazy_call", None)
    if attach is None or lazy is None:
        return

    def attach_once():
        # Runs when the program initialises CUDA (torch's queue of deferred calls); an error
        # here would fail the program's initialisation, so none escapes.
        global _attached
        try:
            if not _attached:
                attach(_observed)
                _attached = True
        except Exception:
            pass

    try:
        lazy(attach_once)
    except Exception:
        pass


def _observed(device, requested, total, free):
    """The CUDA caching allocator is about to raise torch.OutOfMemoryError."""
    global _count, _latest
    enabled = gc.isenabled()
    gc.disable()  # no finalizer of the program's runs inside the allocator's call
    try:
        _count += 1
        event = {
            "index": _count,
            "source": "allocator",
            "caught": True,
            "device": int(device),
            "requested_bytes": int(requested),
            "device_total_bytes": int(total),
            "device_free_bytes": int(free),
        }
        # The allocator passes the process's cap (set_per_process_memory_fraction) as the
        # total when there is one; the device's capacity says which it was.
        torch = sys.modules.get("torch")
        try:
            capacity = int(torch.cuda.mem_get_info(device)[1])
        except Exception:
            capacity = None
        if capacity is not None and total < capacity:
            event["device_total_bytes"] = capacity
            event["process_cap_bytes"] = int(total)
        frames, thread = _stack_now()
        _fill(event, frames, thread, "cuda", int(device))
        if len(_events) < MAX_EVENTS:
            _events.append(event)
            _latest = None
        else:
            _latest = event
    except BaseException:
        pass  # never into the allocator
    finally:
        if enabled:
            gc.enable()


def _stack_now():
    """The Python frames that led to the allocation, innermost first, and whose thread they are.
    On autograd's own threads (backward) there are none: the frames are those of the thread
    that waits in backward()."""
    try:
        f = sys._getframe(2)  # past _observed: the Python code that called the allocating op
    except ValueError:  # a thread of libtorch's own, with no Python frames
        f = None
    if f is not None:
        return _frames_from(f), "this"
    current = sys._current_frames()
    waiting = None
    for ident, top in current.items():
        g = top
        while g is not None:
            if "autograd" in g.f_code.co_filename and g.f_code.co_name in (
                "_engine_run_backward", "backward", "grad"
            ):
                waiting = top
                break
            g = g.f_back
        if waiting is not None:
            break
    if waiting is None:
        waiting = current.get(threading.main_thread().ident)
    return (_frames_from(waiting) if waiting is not None else []), "autograd"


def _frames_from(f):
    frames = []
    while f is not None and len(frames) < 10000:
        frames.append(f)
        f = f.f_back
    return frames


def _is_user(filename):
    boot = sys.modules.get("_memprof_bootstrap")
    try:
        return boot._is_user_file(filename) if boot is not None else not filename.startswith("<")
    except Exception:
        return False


def _describe(frame, lineno=None):
    import linecache

    code = frame.f_code
    line = frame.f_lineno if lineno is None else lineno
    return {
        "file": code.co_filename,
        "line": line,
        "function": getattr(code, "co_qualname", code.co_name),
        "source": linecache.getline(code.co_filename, line).strip(),
        "user": _is_user(code.co_filename),
    }


def _fill(event, frames, thread, device_type, device_index, lines=None, exc=None):
    """Adds the stack, the innermost user line, the allocator's numbers, the live tensors and the
    active modules to `event`. `frames`: innermost first; `lines`: their line numbers if they
    are a traceback's (else each frame's current line)."""
    described = [
        _describe(f, None if lines is None else lines[i]) for i, f in enumerate(frames[:MAX_FRAMES])
    ]
    event["thread"] = "autograd" if thread == "autograd" else "program"
    event["stack"] = described
    event["line"] = next((d for d in described if d["user"]), None)
    torch = sys.modules.get("torch")
    if torch is not None and device_type == "cuda":
        _allocator_numbers(event, torch, device_index)
    event["expandable_segments"] = _expandable_segments()
    event["modules_active"] = _modules_active(exc)
    # The user's variables name tensors first; torch's frames (Sequential.forward:input) name
    # only what no variable of the user's holds.
    user = [f for f in frames if _is_user(f.f_code.co_filename)]
    others = [f for f in frames if not f.f_code.co_filename.startswith("<memprof")
              and f not in user]
    event["tensors"] = _tensors(device_type, device_index, user, others)
    if event["tensors"] is not None:
        line = event["line"]
        event["tensors"].update(
            function=line["function"] if line else "", call=event["index"], raised=True
        )


def _allocator_numbers(event, torch, device):
    try:
        stats = torch.cuda.memory_stats(device)
        allocated = stats.get("allocated_bytes.all.current")
        reserved = stats.get("reserved_bytes.all.current")
        event["allocated_bytes"] = allocated
        event["reserved_bytes"] = reserved
        event["active_bytes"] = stats.get("active_bytes.all.current")
        event["inactive_split_bytes"] = stats.get("inactive_split_bytes.all.current")
        if allocated is not None and reserved is not None:
            event["fragmentation_bytes"] = reserved - allocated
    except Exception:
        pass
    try:
        largest = 0
        for segment in torch.cuda.memory_snapshot():
            if segment.get("device") != device:
                continue
            for block in segment.get("blocks", ()):
                if block.get("state") == "inactive":
                    largest = max(largest, block.get("size", 0))
        event["largest_free_block_bytes"] = largest
    except Exception:
        pass


def _expandable_segments():
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        conf = os.environ.get(var, "").replace(" ", "").lower()
        if "expandable_segments:true" in conf:
            return True
    return False


def _modules_active(exc):
    """The module calls running now, or, for an exception at the top, when it was raised."""
    modules = sys.modules.get("_memprof_modules")
    try:
        if modules is None:
            return []
        return modules.active() if exc is None else modules.active_at(exc)
    except Exception:
        return []


def _tensors(device_type, device_index, user_frames, other_frames):
    """The --tensors scan on the failing device, while the frames are alive; skipped once the
    scans have taken SCAN_BUDGET_S."""
    global _scan_seconds
    if _scan_seconds > SCAN_BUDGET_S:
        return None
    import _memprof_inventory

    start = time.perf_counter()
    try:
        inv = _memprof_inventory.take(
            device_type, device_index, "out of memory", user_frames, other_frames
        )
    except Exception:
        inv = None
    _scan_seconds += time.perf_counter() - start
    if inv is not None:
        allocated = _allocated(device_type, device_index)
        if allocated is not None:
            inv["allocated_bytes"] = allocated
            inv["gap_bytes"] = allocated - inv["tensor_bytes"]
    return inv


def _allocated(device_type, device_index):
    torch = sys.modules.get("torch")
    if device_type == "cuda" and torch is not None:
        try:
            return torch.cuda.memory_allocated(device_index)
        except Exception:
            return None
    return None


# torch's message: "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of
# 79.19 GiB of which 1.06 GiB is free. ... Of the allocated memory 77.50 GiB is allocated by
# PyTorch, and 120.00 MiB is reserved by PyTorch but unallocated."
_SIZE = r"([\d.]+) (bytes|KiB|MiB|GiB)"
_UNITS = {"bytes": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


def _parsed(message, pattern):
    m = re.search(pattern, message)
    if m is None:
        return None
    groups = m.groups()
    return groups[:-2], int(round(float(groups[-2]) * _UNITS[groups[-1]]))


def _from_message(event, message):
    requested = _parsed(message, r"Tried to allocate " + _SIZE)
    if requested is not None:
        event["requested_bytes"] = requested[1]
    capacity = re.search(r"GPU (\d+) has a total capacity of " + _SIZE + " of which " + _SIZE + " is free", message)
    if capacity is not None:
        g = capacity.groups()
        event["device"] = int(g[0])
        event["device_total_bytes"] = int(round(float(g[1]) * _UNITS[g[2]]))
        event["device_free_bytes"] = int(round(float(g[3]) * _UNITS[g[4]]))
    by_torch = _parsed(message, r"Of the allocated memory " + _SIZE)
    unallocated = _parsed(message, _SIZE + r" is reserved by PyTorch but unallocated")
    if by_torch is not None:
        event["allocated_bytes"] = by_torch[1]
        if unallocated is not None:
            event["reserved_bytes"] = by_torch[1] + unallocated[1]
            event["fragmentation_bytes"] = unallocated[1]


def _format_size(n):
    """c10's format_size, as torch's message prints sizes."""
    if n <= 1024:
        return f"{n} bytes"
    if n <= 1048576:
        return f"{n / 1024:.2f} KiB"
    if n <= 1073741824:
        return f"{n / 1048576:.2f} MiB"
    return f"{n / 1073741824:.2f} GiB"


def uncaught(exc, traceback=None):
    """The program ended with `exc` (`traceback`: its whole traceback, which the exception's own
    may lack): if it is an OOM, the record of that OOM is the one not caught (the allocator's
    latest, when its message matches), else one is made from the exception."""
    global _count
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is None or not isinstance(exc, oom_type):
        return
    message = str(exc)
    last = _latest if _latest is not None else (_events[-1] if _events else None)
    if (
        last is not None
        and last.get("source") == "allocator"
        and last["caught"]
        and last["index"] == _count
        and f"Tried to allocate {_format_size(last['requested_bytes'])}" in message
    ):
        last["caught"] = False
        last["message"] = message.splitlines()[0] if message else ""
        if last is _latest:
            _events.append(last)
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        _count += 1
        event = {"index": _count, "source": "exception", "caught": False,
                 "message": message.splitlines()[0] if message else ""}
        _from_message(event, message)
        frames, lines = [], []
        tb = traceback if traceback is not None else exc.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            lines.append(tb.tb_lineno)
            tb = tb.tb_next
        frames.reverse()
        lines.reverse()
        cuda = torch.cuda.is_initialized() if hasattr(torch, "cuda") else False
        if cuda:
            device_type, device_index = "cuda", event.get("device", torch.cuda.current_device())
        else:
            device_type, device_index = (
                (_options.device_type, _options.device_index) if _options is not None else ("cpu", None)
            )
        _fill(event, frames, "this", device_type, device_index, lines, exc)
        event.setdefault("device", device_index if device_type == "cuda" else None)
        _events.append(event)
        del frames
    finally:
        if enabled:
            gc.enable()


def report():
    """What was recorded, for the report; None when no OOM happened."""
    if not _count:
        return None
    events = list(_events)
    if _latest is not None and _latest not in events:
        events.append(_latest)
    caught = _count - sum(1 for e in events if not e["caught"])
    return {"count": _count, "caught": caught, "events": events,
            "scan_seconds": round(_scan_seconds, 3)}
