//! `--history`: handing the Python side (src/python/py/history.py) memprof's own record of
//! the allocator's events (`capture::history`), its stacks and its module labels, to write.
use crate::capture::recorder;
use pyo3::prelude::*;

/// One event for the writer: action (torch's name), device (-1: the CPU), address, size,
/// stream, time (µs since the epoch), the targeted function (index into `targeted_functions`)
/// and line running then, the thread's whole stack (an id of `history_stacks`; 0: none) and
/// the module call running (an id of the labels; 0: none).
type Event = (
    &'static str,
    i32,
    u64,
    i64,
    u64,
    i64,
    Option<u32>,
    u32,
    u32,
    u32,
);

/// `_memprof.history_events()`: stops the record; its events, how many older ones were
/// dropped, whether it ever started, whether CUDA's could not (another allocator backend), and
/// the module labels by id (id 1 first).
#[pyfunction]
pub fn history_events() -> (Vec<Event>, u64, bool, bool, Vec<String>) {
    let taken = crate::capture::history::stop();
    crate::torch::cuda_history_enable(false);
    let events = taken
        .events
        .into_iter()
        .map(|e| {
            let (func, line) =
                crate::torch::tags::decode(e.tag).map_or((None, 0), |(f, l)| (Some(f), l));
            let action = e.action.name();
            (
                action, e.device, e.ptr, e.size, e.stream, e.time_us, func, line, e.stack, e.label,
            )
        })
        .collect();
    let labels = crate::capture::history::labels();
    (
        events,
        taken.dropped,
        taken.started,
        taken.unavailable,
        labels,
    )
}

/// `_memprof.history_recording()`: whether the record is on now.
#[pyfunction]
pub fn history_recording() -> bool {
    crate::capture::history::is_on()
}

/// `_memprof.history_label(label)`: the module call running from now on ("": none), which
/// the events carry as their `user_metadata` (`--modules`).
#[pyfunction]
pub fn history_label(label: &str) {
    crate::capture::history::set_label(label);
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
