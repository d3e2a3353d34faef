//! `--history`: telling the Python side (src/python/py/history.py) when measured targeted calls
//! start and stop on CUDA, and handing it memprof's own CPU allocation record and its stacks to
//! write.
use crate::capture::recorder;
use pyo3::prelude::*;

/// Starts (true) or pauses (false) the stacks of torch's allocator history.
pub fn apply(py: Python<'_>, changes: Vec<bool>) {
    let Ok(history) = py.import("_memprof_history") else {
        return;
    };
    for started in changes {
        let name = if started {
            "call_started"
        } else {
            "call_ended"
        };
        match history.call_method0(name) {
            // CUDA is not initialised yet: ask again once the program has done it.
            Ok(r) if started && !r.is_truthy().unwrap_or(true) => {
                recorder::with(|r| r.history_wait());
            }
            Ok(_) => {}
            Err(e) => e.write_unraisable(py, None),
        }
    }
}

/// One CPU event for the writer: address, size (negative: freed), time (µs since the epoch),
/// the targeted function (index into `targeted_functions`) and line running then, and the
/// thread's whole stack (an id of `history_stacks`; 0: none).
type CpuEvent = (u64, i64, i64, Option<u32>, u32, u32);

/// `_memprof.history_cpu_events()`: stops the CPU record; its events and how many were dropped.
#[pyfunction]
pub fn history_cpu_events() -> (Vec<CpuEvent>, u64) {
    let (events, dropped) = crate::capture::history::stop();
    let events = events
        .into_iter()
        .map(|e| {
            let (func, line) =
                crate::torch::tags::decode(e.tag).map_or((None, 0), |(f, l)| (Some(f), l));
            (e.ptr, e.size, e.time_us, func, line, e.stack)
        })
        .collect();
    (events, dropped)
}

/// `_memprof.history_stacks()`: every whole stack read for the history, by id (id 1 first),
/// each innermost frame first as (file, line, function's qualified name).
#[pyfunction]
pub fn history_stacks() -> Vec<Vec<(String, u32, String)>> {
    crate::python::sites::stacks()
        .into_iter()
        .map(|frames| {
            frames
                .into_iter()
                .map(|p| (p.file, p.line, p.function))
                .collect()
        })
        .collect()
}

/// `_memprof.targeted_functions()`: (qualname, file, first line) of every targeted function, in
/// the recorder's order.
#[pyfunction]
pub fn targeted_functions() -> Vec<(String, String, u32)> {
    recorder::with(|r| r.function_list()).unwrap_or_default()
}

/// `_memprof.history_line_timeline()`: (µs since the epoch, function index or None, line) at
/// each change of the targeted line running (CUDA `--history`).
#[pyfunction]
pub fn history_line_timeline() -> Vec<(i64, Option<u32>, u32)> {
    recorder::with(|r| r.history_line_timeline()).unwrap_or_default()
}
