//! The line hook: turns the interpreter's events on targeted code into recorder calls.
//! On Python 3.12+ these are sys.monitoring callbacks on local events of the targeted code objects
//! and of a running target's caller (no global event), so untargeted code pays nothing. On 3.11
//! it is a C trace function (PyEval_SetTrace) on every thread, filtered by code object, from the
//! moment the first code object is targeted (none: no trace function at all).
use crate::recorder;
use pyo3::ffi;
use pyo3::prelude::*;
use std::sync::Mutex;

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

#[cfg(Py_3_12)]
mod imp {
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
        let ptr = code.as_ptr() as usize;
        let (changes, ended, finished, history) = recorder::with(|r| {
            match r.function_of(ptr) {
                Some(func) => targeted(r, current_frame(), func),
                // A watched caller: the only untargeted code with events.
                None => r.on_caller_event(current_frame(), current_thread()),
            }
            (
                r.take_watch_changes(),
                r.take_ended(),
                r.take_finished(),
                r.take_history_changes(),
            )
        })
        .unwrap_or((None, None, false, None));
        if let Some(history) = history {
            crate::python::history::apply(py, history);
        }
        if let Some(ended) = ended {
            crate::python::inventory::run(py, ended, None);
        }
        if finished {
            // The bootstrap switches every event off, watched callers' included.
            crate::python::module::finish_schedule(py);
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

    /// Monitoring is switched off by the bootstrap's `stop()`.
    pub fn stop_on_this_thread() {}

    /// Monitoring is switched off by the bootstrap's `finish_schedule()`.
    pub fn stop_on_all_threads(_py: Python<'_>) {}
}

#[cfg(not(Py_3_12))]
mod imp {
    use super::*;
    use std::collections::HashMap;
    use std::os::raw::c_int;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// YIELD_VALUE in CPython 3.11's bytecode.
    const YIELD_VALUE: u8 = 86;
    const GENERATOR_FLAGS: i32 = 0x20 | 0x80 | 0x200; // CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR

    /// Bytecode of targeted generators and coroutines: the trace function reports a yield as a
    /// return and a resume as a call, and the instruction tells them apart.
    static GENERATOR_CODE: Mutex<Option<HashMap<usize, Vec<u8>>>> = Mutex::new(None);

    /// Whether any code is targeted: until then no thread carries the trace function (a trace
    /// function slows every line of every frame on 3.11), so a run with nothing targeted runs
    /// as fast as without memprof.
    static TARGETED: AtomicBool = AtomicBool::new(false);
    /// Whether the script has started; the trace function goes on threads only from then.
    static SCRIPT_STARTED: AtomicBool = AtomicBool::new(false);

    pub fn add_code(ptr: usize) {
        Python::attach(|py| {
            if !TARGETED.swap(true, Ordering::SeqCst) && SCRIPT_STARTED.load(Ordering::SeqCst) {
                // The first target, found while the program runs (an import, @profile).
                set_on_all_threads(py, Some(trace));
            }
            // SAFETY: ptr is a live code object kept alive by KEEP.
            let code = unsafe { Bound::from_borrowed_ptr(py, ptr as *mut ffi::PyObject) };
            let flags: i32 = code
                .getattr("co_flags")
                .and_then(|f| f.extract())
                .unwrap_or(0);
            if flags & GENERATOR_FLAGS != 0 {
                if let Ok(bytes) = code.getattr("co_code").and_then(|b| b.extract::<Vec<u8>>()) {
                    GENERATOR_CODE
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert_with(HashMap::new)
                        .insert(ptr, bytes);
                }
            }
        });
    }

    fn opcode_at(code: usize, offset: c_int) -> Option<u8> {
        let guard = GENERATOR_CODE.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = guard.as_ref()?.get(&code)?;
        usize::try_from(offset)
            .ok()
            .and_then(|o| bytes.get(o).copied())
    }

    extern "C" fn trace(
        _obj: *mut ffi::PyObject,
        frame: *mut ffi::PyFrameObject,
        what: c_int,
        arg: *mut ffi::PyObject,
    ) -> c_int {
        let code = code_of(frame as usize);
        let frame_key = frame as usize;
        let (ended, finished, history) = recorder::with(|r| {
            let Some(func) = r.function_of(code) else {
                // Every frame's events reach a C trace function: the caller's line or return
                // ends the calls that returned to it. (Exceptions are reported: RETURN with NULL.)
                if r.has_returning() && (what == ffi::PyTrace_LINE || what == ffi::PyTrace_RETURN) {
                    r.on_caller_event(frame_key, current_thread());
                }
                // A call of Python code: its caller moved on. (Calls of C functions reach only a
                // profile function, not a trace function, on 3.11.)
                if r.has_returning() && what == ffi::PyTrace_CALL {
                    if let Some(caller) = caller_of(frame_key) {
                        r.on_caller_event(caller, current_thread());
                    }
                }
                return (r.take_ended(), r.take_finished(), r.take_history_changes());
            };
            let thread = current_thread();
            match what {
                ffi::PyTrace_LINE => {
                    // SAFETY: live frame, GIL held.
                    let line = unsafe { ffi::PyFrame_GetLineNumber(frame) };
                    r.on_line(frame_key, func, line.max(0) as u32, thread);
                }
                ffi::PyTrace_CALL => {
                    // SAFETY: live frame, GIL held.
                    let lasti = unsafe { ffi::PyFrame_GetLasti(frame) };
                    let resume = opcode_at(code, lasti - 2) == Some(YIELD_VALUE);
                    // Code 0: a C trace function sees every frame, there is nothing to watch;
                    // and every exit is reported, so the stack needs no ancestry checks.
                    let caller = caller_with_code(frame_key, false);
                    r.on_enter(frame_key, func, resume, thread, caller, |_| true);
                }
                ffi::PyTrace_RETURN => {
                    if arg.is_null() {
                        r.on_exit(frame_key, true, thread);
                    } else {
                        // SAFETY: live frame, GIL held.
                        let lasti = unsafe { ffi::PyFrame_GetLasti(frame) };
                        if opcode_at(code, lasti) == Some(YIELD_VALUE) {
                            r.on_yield(frame_key, thread);
                        } else {
                            r.on_exit(frame_key, false, thread);
                        }
                    }
                }
                _ => {}
            }
            (r.take_ended(), r.take_finished(), r.take_history_changes())
        })
        .unwrap_or((None, false, None));
        if ended.is_some() || finished || history.is_some() {
            // SAFETY: the interpreter calls the trace function with the GIL held.
            let py = unsafe { Python::assume_attached() };
            if let Some(history) = history {
                crate::python::history::apply(py, history);
            }
            if let Some(ended) = ended {
                crate::python::inventory::run(py, ended, None);
            }
            if finished {
                crate::python::module::finish_schedule(py);
            }
        }
        0
    }

    pub fn add_callbacks(_m: &Bound<'_, PyModule>) -> PyResult<()> {
        Ok(())
    }

    /// A new thread: the C trace function replaces threading's Python hook, or, with nothing
    /// targeted yet, the hook is removed.
    pub fn on_thread_start(_py: Python<'_>) -> PyResult<()> {
        let func: Option<ffi::Py_tracefunc> = if TARGETED.load(Ordering::SeqCst) {
            Some(trace)
        } else {
            None
        };
        // SAFETY: GIL held by the caller.
        unsafe { ffi::PyEval_SetTrace(func, std::ptr::null_mut()) };
        Ok(())
    }

    /// The script starts on the calling thread: the C trace function goes on it if any code is
    /// targeted (else when the first target is found).
    pub fn start_on_this_thread() {
        SCRIPT_STARTED.store(true, Ordering::SeqCst);
        if TARGETED.load(Ordering::SeqCst) {
            // SAFETY: GIL held by the caller.
            unsafe { ffi::PyEval_SetTrace(Some(trace), std::ptr::null_mut()) };
        }
    }

    pub fn stop_on_this_thread() {
        // SAFETY: GIL held by the caller.
        unsafe { ffi::PyEval_SetTrace(None, std::ptr::null_mut()) };
    }

    extern "C" {
        /// CPython 3.11's per-thread-state form of PyEval_SetTrace (what 3.12's
        /// PyEval_SetTraceAllThreads loops over).
        fn _PyEval_SetTrace(
            tstate: *mut ffi::PyThreadState,
            func: Option<ffi::Py_tracefunc>,
            arg: *mut ffi::PyObject,
        ) -> c_int;
    }

    /// Removes the trace function from every thread, so that code runs untraced from now on.
    pub fn stop_on_all_threads(py: Python<'_>) {
        set_on_all_threads(py, None);
    }

    /// Sets (or, with None, removes) the trace function on every thread (what 3.12's
    /// PyEval_SetTraceAllThreads does).
    fn set_on_all_threads(_py: Python<'_>, func: Option<ffi::Py_tracefunc>) {
        // SAFETY: GIL held (the Python token); thread states are walked under it.
        unsafe {
            let interp = ffi::PyInterpreterState_Get();
            let mut ts = ffi::PyInterpreterState_ThreadHead(interp);
            while !ts.is_null() {
                _PyEval_SetTrace(ts, func, std::ptr::null_mut());
                ts = ffi::PyThreadState_Next(ts);
            }
        }
    }
}

pub use imp::*;
