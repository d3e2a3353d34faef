//! The line hook: turns the interpreter's events on targeted code into recorder calls.
//! On Python 3.12+ these are sys.monitoring callbacks on local events of the targeted code objects
//! and of a running target's caller (no global event), so untargeted code pays nothing. On 3.11
//! it is a C trace function (PyEval_SetTrace), put on a thread by a frame-evaluation hook
//! (PEP 523) when a targeted frame starts there and taken off once nothing on the thread waits
//! for an event; untargeted code then runs untraced (nothing targeted: no hook at all).
use crate::capture::recorder;
use pyo3::ffi;
use pyo3::prelude::*;
use std::sync::Mutex;

/// Interpreter events that reached the hook, for the report (`metadata.hook_events`).
static HOOK_EVENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[inline]
fn count_event() {
    HOOK_EVENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// A targeted call started on a thread where the program had its own trace function
/// (`sys.settrace`: coverage, a debugger), which on 3.11 leaves no room for memprof's: that call's
/// lines were not measured. (On 3.12+ sys.monitoring and sys.settrace work side by side.)
static FOREIGN_TRACER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the program's own trace function kept a targeted call from being measured.
pub fn foreign_tracer_seen() -> bool {
    FOREIGN_TRACER.load(std::sync::atomic::Ordering::Relaxed)
}

/// Interpreter events the hook has handled so far.
pub fn hook_events() -> u64 {
    HOOK_EVENTS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Strong references to every registered code object, so their addresses stay theirs.
static KEEP: Mutex<Vec<Py<PyAny>>> = Mutex::new(Vec::new());

pub fn keep_alive(code: Py<PyAny>) {
    KEEP.lock().unwrap_or_else(|e| e.into_inner()).push(code);
}

/// The address of the frame being executed on this thread.
#[cfg(Py_3_12)]
#[inline]
fn current_frame() -> usize {
    // SAFETY: called with the GIL held, from a callback of the running frame; borrowed reference.
    unsafe { ffi::PyEval_GetFrame() as usize }
}

/// The calling frame of `frame` (its address), if it has a Python caller. The caller's frame
/// object lives as long as the caller runs, so its address identifies it until then.
#[inline]
fn caller_of(frame: usize) -> Option<usize> {
    // SAFETY: frame is the live frame of the current callback; GIL held; new reference dropped.
    unsafe {
        let back = ffi::PyFrame_GetBack(frame as *mut ffi::PyFrameObject);
        if back.is_null() {
            None
        } else {
            ffi::Py_DECREF(back as *mut ffi::PyObject);
            Some(back as usize)
        }
    }
}

/// This thread's key: its PyThreadState.
#[inline]
pub fn current_thread() -> usize {
    // SAFETY: called with the GIL held.
    unsafe { ffi::PyThreadState_Get() as usize }
}

/// Whether `candidate` is `from` or one of its callers.
#[cfg_attr(not(Py_3_12), allow(dead_code))]
fn on_stack_of(from: usize, candidate: usize) -> bool {
    let mut frame = Some(from);
    while let Some(f) = frame {
        if f == candidate {
            return true;
        }
        frame = caller_of(f);
    }
    false
}

/// The frame that called `frame`, with its code object when `with_code`.
#[inline]
fn caller_with_code(frame: usize, with_code: bool) -> recorder::Caller {
    match caller_of(frame) {
        Some(f) => recorder::Caller {
            frame: f,
            code: if with_code { code_of(f) } else { 0 },
        },
        None => recorder::Caller { frame: 0, code: 0 },
    }
}

/// The code object (address) a frame runs.
#[inline]
fn code_of(frame: usize) -> usize {
    // SAFETY: frame is live; GIL held; new reference dropped (the frame keeps the code alive).
    unsafe {
        let code = ffi::PyFrame_GetCode(frame as *mut ffi::PyFrameObject);
        ffi::Py_DECREF(code as *mut ffi::PyObject);
        code as usize
    }
}

/// What the recorder asks of Python after an event, in the order it must happen: the
/// `--tensors` inventories of the calls that ended, and the end of the schedule. True when the
/// schedule ended (every hook is being switched off).
fn after_event(py: Python<'_>, ended: Option<Vec<recorder::EndedCall>>, finished: bool) -> bool {
    if let Some(ended) = ended {
        crate::python::ext::inventory::run(py, ended, None);
    }
    if finished {
        finish_schedule(py);
    }
    finished
}

/// The bootstrap's `finish_schedule()`, called once the schedule is complete (each in-process
/// session loads a bootstrap of its own, and sets its own).
static FINISHER: Mutex<Option<Py<PyAny>>> = Mutex::new(None);

#[pyfunction]
fn set_finisher(finisher: Py<PyAny>) {
    *FINISHER.lock().unwrap_or_else(|e| e.into_inner()) = Some(finisher);
}

/// Tells the bootstrap that every target had its measured calls (see `Recorder::take_finished`).
fn finish_schedule(py: Python<'_>) {
    let finisher = FINISHER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|f| f.clone_ref(py));
    if let Some(finisher) = finisher {
        if let Err(e) = finisher.call0(py) {
            e.write_unraisable(py, None);
        }
    }
}

/// Forgets every target and counter, with the hook off: an in-process session's end (and its
/// start, after a session of the same process).
pub fn reset() {
    // SAFETY: called with the GIL held (the in-process session's methods).
    let py = unsafe { Python::assume_attached() };
    stop_on_all_threads(py);
    reset_targets();
    HOOK_EVENTS.store(0, std::sync::atomic::Ordering::Relaxed);
    FOREIGN_TRACER.store(false, std::sync::atomic::Ordering::Relaxed);
    *FINISHER.lock().unwrap_or_else(|e| e.into_inner()) = None;
    KEEP.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Adds the hook's functions to the `_memprof` module.
pub fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_finisher, m)?)?;
    add_callbacks(m)
}

#[cfg(Py_3_12)]
mod monitoring;
#[cfg(Py_3_12)]
pub use monitoring::*;
#[cfg(not(Py_3_12))]
mod settrace;
#[cfg(not(Py_3_12))]
pub use settrace::*;
