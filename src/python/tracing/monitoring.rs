//! The line hook on Python 3.12+: sys.monitoring callbacks on local events of the targeted code
//! objects and of a running target's caller (no global event), so untargeted code pays nothing.
use super::*;
use std::sync::OnceLock;

/// Bootstrap's `watch(code, on)`: switches a caller's LINE, PY_RETURN and PY_YIELD on or off.
static WATCHER: OnceLock<Py<PyAny>> = OnceLock::new();

#[pyfunction]
fn set_watcher(watcher: Py<PyAny>) {
    let _ = WATCHER.set(watcher);
}

/// Runs `targeted` for a targeted code object, or tells the recorder a watched caller moved;
/// then switches callers' events on or off as the recorder asks. That calls into Python, so
/// it happens outside the recorder's lock.
#[inline]
fn dispatch(
    py: Python<'_>,
    code: &Bound<'_, PyAny>,
    targeted: impl FnOnce(&mut recorder::Recorder, usize, u32),
) {
    count_event();
    let ptr = code.as_ptr() as usize;
    let (changes, ended, finished) = recorder::with(|r| {
        match r.function_of(ptr) {
            Some(func) => targeted(r, current_frame(), func),
            // A watched caller: the only untargeted code with events.
            None => r.on_caller_event(current_frame(), current_thread()),
        }
        r.history_poll();
        (r.take_watch_changes(), r.take_ended(), r.take_finished())
    })
    .unwrap_or((None, None, false));
    if after_event(py, ended, finished) {
        // The bootstrap switched every event off, watched callers' included.
        return;
    }
    let (Some(changes), Some(watcher)) = (changes, WATCHER.get()) else {
        return;
    };
    for (code, on) in changes {
        // SAFETY: a watched caller's code object is alive while it runs and until its last
        // waiting call ends, which is when it is switched off.
        let code = unsafe { Bound::from_borrowed_ptr(py, code as *mut ffi::PyObject) };
        if let Err(e) = watcher.call1(py, (code, on)) {
            e.write_unraisable(py, None);
        }
    }
}

/// A targeted frame starts or resumes: its caller is watched while it runs, so that a
/// return or an exception (which 3.12 does not report locally) ends it when the caller
/// resumes.
fn enter(r: &mut recorder::Recorder, frame: usize, func: u32, resume: bool) {
    let caller = caller_with_code(frame, true);
    let from = caller.frame;
    r.on_enter(frame, func, resume, current_thread(), caller, |f| {
        from != 0 && on_stack_of(from, f)
    });
}

#[pyfunction]
fn on_start(py: Python<'_>, code: &Bound<'_, PyAny>, _offset: &Bound<'_, PyAny>) {
    dispatch(py, code, |r, frame, func| enter(r, frame, func, false));
}

#[pyfunction]
fn on_resume(py: Python<'_>, code: &Bound<'_, PyAny>, _offset: &Bound<'_, PyAny>) {
    dispatch(py, code, |r, frame, func| enter(r, frame, func, true));
}

/// A call made by targeted code or by a watched caller: calls that returned to this frame
/// have ended (the caller moved on, within the same statement too).
#[pyfunction]
fn on_call(
    py: Python<'_>,
    code: &Bound<'_, PyAny>,
    _offset: &Bound<'_, PyAny>,
    _callable: &Bound<'_, PyAny>,
    _arg0: &Bound<'_, PyAny>,
) {
    dispatch(py, code, |r, frame, _| {
        r.on_caller_event(frame, current_thread())
    });
}

#[pyfunction]
fn on_line(py: Python<'_>, code: &Bound<'_, PyAny>, line: u32) {
    dispatch(py, code, |r, frame, func| {
        r.on_line(frame, func, line, current_thread())
    });
}

#[pyfunction]
fn on_return(
    py: Python<'_>,
    code: &Bound<'_, PyAny>,
    _offset: &Bound<'_, PyAny>,
    _value: &Bound<'_, PyAny>,
) {
    dispatch(py, code, |r, frame, _| {
        r.on_exit(frame, false, current_thread())
    });
}

#[pyfunction]
fn on_yield(
    py: Python<'_>,
    code: &Bound<'_, PyAny>,
    _offset: &Bound<'_, PyAny>,
    _value: &Bound<'_, PyAny>,
) {
    dispatch(py, code, |r, frame, _| r.on_yield(frame, current_thread()));
}

pub fn add_callbacks(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_watcher, m)?)?;
    m.add_function(wrap_pyfunction!(on_start, m)?)?;
    m.add_function(wrap_pyfunction!(on_resume, m)?)?;
    m.add_function(wrap_pyfunction!(on_line, m)?)?;
    m.add_function(wrap_pyfunction!(on_call, m)?)?;
    m.add_function(wrap_pyfunction!(on_return, m)?)?;
    m.add_function(wrap_pyfunction!(on_yield, m)?)?;
    Ok(())
}

/// sys.monitoring reaches every thread: the thread hook only removes itself.
pub fn on_thread_start(py: Python<'_>) -> PyResult<()> {
    py.import("sys")?.call_method1("settrace", (py.None(),))?;
    Ok(())
}

/// Monitoring was switched on by the bootstrap; nothing to do per thread.
pub fn start_on_this_thread() {}

/// Targets live in sys.monitoring's local events, which the bootstrap switches off itself.
pub fn reset_targets() {}

/// Monitoring is switched off by the bootstrap's `stop()`.
pub fn stop_on_this_thread() {}

/// Monitoring is switched off by the bootstrap's `finish_schedule()`.
pub fn stop_on_all_threads(_py: Python<'_>) {}
