"""--history FILE: an allocation history that PyTorch's memory_viz opens (pytorch.org/memory_viz,
`python -m torch.cuda._memory_viz trace_plot FILE`), written at the end of the run (also after
an uncaught exception, an OOM or Ctrl-C).

CUDA: torch's own allocator history (`_record_memory_history`). It starts with the first
measured targeted call and records every event from then on (a consistent timeline); Python
stacks are captured only while measured targeted calls run, which is where the cost of history
lies. Every event gets memprof's context as a first frame (`memprof:<function> line N`) and as
`user_metadata`.

CPU: libtorch keeps no history there, so memprof writes the same format from its own record of
the allocator's reports (src/capture/history.rs): an `alloc` and a `free_completed` per tensor
storage, each inside a `segment_alloc`/`segment_free` of its own size (the CPU allocator asks the
system for each block); inside measured targeted calls, memprof's frame of the targeted line and
the allocating thread's whole Python stack, which memprof reads natively
(src/python/sites/stacks.rs). What the CPU cannot give is listed in the file's `memprof`
entry."""

import bisect
import os
import pickle
import sys
import time

import _memprof

_options = None  # the run's Options (src/python/runner.rs), set by install
_written = False
_cuda_recording = False
# When the run or session began (µs since the epoch, torch's trace clock): torch keeps its ring
# between recordings, so an in-process session's file leaves out what came before it.
_started_us = 0
# The history taken when a schedule's last measured call ended (schedule_finished), if it was.
_kept = None
_MEMPROF_FILE = "memprof"


def install(options):
    """A run's, or an in-process session's (each writes its own file: nothing carries over)."""
    global _options, _written, _cuda_recording, _started_us, _kept
    _options = options
    _written = False
    _cuda_recording = False
    _started_us = time.time_ns() // 1000
    _kept = None


def _record(context):
    """(Re)starts torch's recording, with Python stacks or without; the history is kept."""
    import torch

    torch.cuda.memory._record_memory_history(
        "all",
        context="all" if context else None,
        stacks="python",
        max_entries=_options.history_max_entries,
        clear_history=False,
    )


def call_started():
    """The first measured targeted call begins while none runs (CUDA). Returns False when CUDA
    is not initialised yet: memprof never initialises it, and torch's history cannot be switched
    on from inside CUDA's lazy initialisation (it would wait on itself), so memprof asks again
    at the first event after the program has initialised CUDA."""
    global _cuda_recording
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return False
    try:
        _record(context=True)
        _cuda_recording = True
    except Exception as e:  # never into the program
        _memprof.warn("--history: could not start torch's allocator history: %s" % e)
    return True


def call_ended():
    """The last measured targeted call running has ended (CUDA): events go on being recorded,
    without stacks."""
    if not _cuda_recording:
        return
    try:
        _record(context=False)
    except Exception as e:
        _memprof.warn("--history: %s" % e)


def _take():
    """Takes the history now, once, and stops recording: torch's snapshot on CUDA (None when
    it never recorded), memprof's record of the CPU's events and how many were dropped. Taken
    together, the snapshot's state and its events end at the same moment, as memory_viz
    replays them."""
    global _kept, _cuda_recording
    if _kept is None:
        if _options.device_type != "cuda":
            _kept = _memprof.history_cpu_events()
        else:
            torch = sys.modules.get("torch")
            if torch is not None and _cuda_recording:
                _kept = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(None)
                _cuda_recording = False
    return _kept


def schedule_finished():
    """Every call --warmup/--calls measures has run: the history is complete. It is taken now
    and recording stops, so the rest of the run pays nothing for it; the file is written at the
    end, as always."""
    if _options is None or not _options.history:
        return
    try:
        _take()
    except Exception as e:  # never into the program
        _memprof.warn("--history: %s" % e)


def recording():
    """Whether torch's history is being recorded now (CUDA)."""
    return _cuda_recording


def module_context(label):
    """--modules with --history: the module call running, as the events' user_metadata."""
    try:
        import torch

        torch.cuda.memory._set_memory_metadata(label)
    except Exception:
        pass


def _frame(qualname, line):
    return {"filename": _MEMPROF_FILE, "line": int(line), "name": "%s line %d" % (qualname, line)}


def _targeted_frame(frames, targets):
    """The innermost frame of a targeted function in a stack torch recorded (innermost first)."""
    for f in frames:
        key = (os.path.realpath(f.get("filename", "")), f.get("name"))
        if key in targets:
            return targets[key], f.get("line", 0)
    return None


def _annotate_cuda(snapshot, functions, timeline):
    """Gives every event memprof's context: the targeted line from the event's own Python stack
    when it has one, else the line memprof saw running at the event's time (autograd's threads
    record no Python frames; the clocks agree to microseconds), else 'outside'."""
    targets = {}
    for qualname, file, _first in functions:
        real = os.path.realpath(file)
        targets[(real, qualname.rsplit(".", 1)[-1])] = qualname
        targets[(real, qualname)] = qualname
    times = [t for t, _, _ in timeline]
    outside = {"filename": _MEMPROF_FILE, "line": 0,
               "name": "outside the targeted calls (memprof records no stack there)"}
    kept = 0
    for trace in snapshot.get("device_traces", []):
        for e in trace:
            kept += 1
            frames = e.get("frames") or []
            found = _targeted_frame(frames, targets)
            if found is None and times and "time_us" in e:
                i = bisect.bisect_right(times, e["time_us"]) - 1
                if i >= 0 and timeline[i][1] is not None:
                    found = functions[timeline[i][1]][0], timeline[i][2]
            if found:
                qualname, line = found
                e["frames"] = [_frame(qualname, line)] + list(frames)
                if not e.get("user_metadata"):
                    e["user_metadata"] = "memprof: %s line %d" % (qualname, line)
            elif not frames:
                e["frames"] = [outside]
    return kept


def _stack_frames(stacks):
    """Each whole stack (by id; 0: none) as torch's frames: filename, line, and the function's
    name as torch gives it (the code object's name, not its qualified name). One list per stack,
    which pickle then stores once."""
    out = [[]]
    for frames in stacks:
        out.append([{"filename": file, "line": int(line), "name": qualname.rsplit(".", 1)[-1]}
                    for file, line, qualname in frames])
    return out


def _cpu_snapshot(events, functions, stacks):
    """The CUDA snapshot format, from memprof's own CPU allocation record."""
    trace = []
    live = {}
    for ptr, size, time_us, func, line, stack in events:
        frames = []
        if func is not None:
            qualname, file, _first = functions[func]
            # memprof's frame of the targeted line, then the whole stack (where the thread's
            # frames could be read: else the targeted line's own frame).
            own = stacks[stack] if stack else [
                {"filename": file, "line": int(line), "name": qualname}]
            frames = [_frame(qualname, line)] + own
        common = {"addr": ptr, "stream": 0, "time_us": time_us, "frames": frames}
        if size > 0:
            trace.append(dict(common, action="segment_alloc", size=size))
            trace.append(dict(common, action="alloc", size=size))
            live[ptr] = (size, frames)
        else:
            trace.append(dict(common, action="free_requested", size=-size))
            trace.append(dict(common, action="free_completed", size=-size))
            trace.append(dict(common, action="segment_free", size=-size))
            live.pop(ptr, None)
    segments = []
    for ptr, (size, frames) in sorted(live.items()):
        block = {"address": ptr, "size": size, "requested_size": size,
                 "state": "active_allocated", "frames": frames}
        segments.append({
            "device": 0, "address": ptr, "total_size": size, "stream": 0,
            "segment_type": "large" if size > (1 << 20) else "small", "segment_pool_id": (0, 0),
            "allocated_size": size, "active_size": size, "requested_size": size,
            "is_expandable": False, "frames": frames, "blocks": [block],
        })
    return {"segments": segments, "device_traces": [trace]}


def finish(functions):
    """Writes the history file (once); returns what the report says of it, or None."""
    global _written
    path = _options.history if _options is not None else None
    if not path or _written:
        return None
    _written = True
    max_entries = _options.history_max_entries
    info = {"file": path, "max_entries": max_entries}
    try:
        if _options.device_type == "cuda":
            snapshot = _take()
            if snapshot is None:
                info.update(events=0, dropped=None, source="none",
                            note="no measured targeted call ran while CUDA was initialised")
                snapshot = {"segments": [], "device_traces": []}
            else:
                for trace in snapshot.get("device_traces", []):
                    trace[:] = [e for e in trace if e.get("time_us", _started_us) >= _started_us]
                kept = _annotate_cuda(snapshot, functions, _memprof.history_line_timeline())
                info.update(events=kept, dropped=None if kept < max_entries else "unknown",
                            source="torch.cuda.memory._record_memory_history")
        else:
            events, dropped = _take()
            snapshot = _cpu_snapshot(events, functions, _stack_frames(_memprof.history_stacks()))
            info.update(events=len(events), dropped=dropped,
                        source="memprof's record of libtorch's CPU allocation reports")
        snapshot["memprof"] = dict(info, cpu_limits=None if _options.device_type == "cuda" else (
            "CPU: no caching allocator, so each block is its own segment (segment_alloc/"
            "segment_free around it); no streams (0); free_requested and free_completed coincide; "
            "frames (memprof's of the targeted line, then the whole Python stack) for events "
            "inside measured targeted calls only"))
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "wb") as f:
            # Protocol 4: what PyTorch's memory_viz reads (Python 3.14's default, 5, it does not).
            pickle.dump(snapshot, f, protocol=4)
        os.replace(tmp, path)
    except Exception as e:
        _memprof.warn("--history: could not write %s: %s" % (path, e))
        return None
    return info
