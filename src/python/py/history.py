"""--history FILE: an allocation history that PyTorch's memory_viz opens (pytorch.org/memory_viz,
`python -m torch.cuda._memory_viz trace_plot FILE`), written at the end of the run (also after
an uncaught exception, an OOM or Ctrl-C).

The events are memprof's own record (src/capture/history.rs), from the first measured targeted
call on: on CUDA the caching allocator's trace entries, every action of every device, which
memprof takes from the allocator's trace tracker without switching torch's own history on (a
program that records its own keeps it, and memprof does not pay for torch's stack capture); on
the CPU, where libtorch keeps no history, the allocator's reports: an `alloc` and a
`free_completed` per tensor storage, each inside a `segment_alloc`/`segment_free` of its own
size (the CPU allocator asks the system for each block). Inside measured targeted calls each
event carries memprof's frame of the targeted line, then the allocating thread's whole Python
stack, which memprof reads natively (src/python/sites/stacks.rs; autograd's threads run no
Python: their events have memprof's frame alone), and the line as `user_metadata` (under
--modules, the module call and phase). The state at the end (CUDA's segments and blocks) is
torch's `_snapshot()`, taken when the record stops. What the CPU cannot give is listed in the
file's `memprof` entry."""

import os
import pickle
import sys

import _memprof

_options = None  # the run's Options (src/python/runner.rs), set by install
_written = False
# The record, taken when a schedule's last measured call ended (schedule_finished) or at the end.
_kept = None
_MEMPROF_FILE = "memprof"
_OUTSIDE = {"filename": _MEMPROF_FILE, "line": 0,
            "name": "outside the targeted calls (memprof records no stack there)"}


def install(options):
    """A run's, or an in-process session's (each writes its own file: nothing carries over)."""
    global _options, _written, _kept
    _options = options
    _written = False
    _kept = None


def _take():
    """Takes the record now, once, and stops it: (events, dropped, started, unavailable,
    labels, CUDA's snapshot of the state then or None). Taken together, the state and the
    events end at the same moment, as memory_viz replays them."""
    global _kept
    if _kept is None:
        events, dropped, started, unavailable, labels = _memprof.history_events()
        state = None
        if _options.device_type == "cuda" and started:
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_initialized():
                state = torch.cuda.memory._snapshot()
        _kept = (events, dropped, started, unavailable, labels, state)
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
    """Whether memprof's record is on now."""
    return _memprof.history_recording()


def module_context(label):
    """--modules with --history: the module call running (None: none), as the events'
    user_metadata."""
    _memprof.history_label(label or "")


def _frame(qualname, line):
    return {"filename": _MEMPROF_FILE, "line": int(line), "name": "%s line %d" % (qualname, line)}


def _stack_frames(stacks):
    """Each whole stack (by id; 0: none) as torch's frames: filename, line, and the function's
    name as torch gives it (the code object's name, not its qualified name). One list per stack,
    which pickle then stores once."""
    out = [[]]
    for frames in stacks:
        out.append([{"filename": file, "line": int(line), "name": qualname.rsplit(".", 1)[-1]}
                    for file, line, qualname in frames])
    return out


class _Frames:
    """The frames and user_metadata of each event, each distinct list made once."""

    def __init__(self, functions, stacks, labels, cpu):
        self.functions, self.stacks, self.cpu = functions, stacks, cpu
        self.labels = [None] + list(labels)
        self.made = {}

    def of(self, func, line, stack):
        key = (func, line, stack)
        frames = self.made.get(key)
        if frames is None:
            frames = self.made[key] = self._make(func, line, stack)
        return frames

    def _make(self, func, line, stack):
        if func is None:
            return [] if self.cpu else [_OUTSIDE]
        qualname, file, _first = self.functions[func]
        own = self.stacks[stack] if stack else (
            # The CPU's thread whose frames could not be read: the targeted line's own frame.
            [{"filename": file, "line": int(line), "name": qualname}] if self.cpu else [])
        # memprof's frame of the targeted line, then the whole stack.
        return [_frame(qualname, line)] + own

    def metadata(self, func, line, label):
        if label:
            return self.labels[label]
        if func is not None:
            return "memprof: %s line %d" % (self.functions[func][0], line)
        return None


def _cpu_snapshot(events, frames):
    """The CUDA snapshot format, from memprof's own CPU allocation record."""
    trace = []
    live = {}
    for action, _device, ptr, size, _stream, time_us, func, line, stack, label in events:
        common = {"addr": ptr, "stream": 0, "time_us": time_us,
                  "frames": frames.of(func, line, stack)}
        metadata = frames.metadata(func, line, label)
        if metadata:
            common["user_metadata"] = metadata
        if action == "alloc":
            trace.append(dict(common, action="segment_alloc", size=size))
            trace.append(dict(common, action="alloc", size=size))
            live[ptr] = (size, common["frames"])
        else:
            trace.append(dict(common, action="free_requested", size=size))
            trace.append(dict(common, action="free_completed", size=size))
            trace.append(dict(common, action="segment_free", size=size))
            live.pop(ptr, None)
    segments = []
    for ptr, (size, block_frames) in sorted(live.items()):
        block = {"address": ptr, "size": size, "requested_size": size,
                 "state": "active_allocated", "frames": block_frames}
        segments.append({
            "device": 0, "address": ptr, "total_size": size, "stream": 0,
            "segment_type": "large" if size > (1 << 20) else "small", "segment_pool_id": (0, 0),
            "allocated_size": size, "active_size": size, "requested_size": size,
            "is_expandable": False, "frames": block_frames, "blocks": [block],
        })
    return {"segments": segments, "device_traces": [trace]}


def _cuda_snapshot(events, frames, state, devices):
    """torch's snapshot of the state at the end with memprof's events as its device_traces,
    one list per device; each live block's frames are its allocation's, where the record has
    it."""
    traces = [[] for _ in range(devices)]
    allocated = {}
    for action, device, ptr, size, stream, time_us, func, line, stack, label in events:
        e = {"action": action, "addr": ptr, "size": size, "stream": stream, "time_us": time_us,
             "frames": frames.of(func, line, stack), "compile_context": "N/A"}
        metadata = frames.metadata(func, line, label)
        if metadata:
            e["user_metadata"] = metadata
        while device >= len(traces):
            traces.append([])
        traces[device].append(e)
        if action == "alloc":
            allocated[(device, ptr)] = e["frames"]
    snapshot = dict(state or {"segments": []})
    for segment in snapshot["segments"]:
        for block in segment.get("blocks", []):
            found = allocated.get((segment.get("device"), block.get("address")))
            if block.get("state") == "active_allocated" and found is not None:
                block["frames"] = found
    snapshot["device_traces"] = traces
    return snapshot


def _device_count():
    torch = sys.modules.get("torch")
    try:
        return torch.cuda.device_count() if torch is not None else 1
    except Exception:
        return 1


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
        events, dropped, started, unavailable, labels, state = _take()
        cuda = _options.device_type == "cuda"
        frames = _Frames(functions, _stack_frames(_memprof.history_stacks()), labels, not cuda)
        info.update(events=len(events), dropped=dropped)
        if cuda:
            snapshot = _cuda_snapshot(events, frames, state, _device_count())
            info["source"] = "memprof's record of the CUDA caching allocator's trace entries"
            if unavailable:
                info.update(source="none", note="the CUDA allocator is not torch's caching "
                            "allocator (another backend): it has no trace entries to record")
            elif not started:
                info.update(source="none",
                            note="no measured targeted call ran while CUDA was initialised")
        else:
            snapshot = _cpu_snapshot(events, frames)
            info["source"] = "memprof's record of libtorch's CPU allocation reports"
        snapshot["memprof"] = dict(info, cpu_limits=None if cuda else (
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
