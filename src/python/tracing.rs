//! The line hook: turns the interpreter's events on targeted code into recorder calls.
//! On Python 3.12+ these are sys.monitoring callbacks on local events of the targeted code objects
//! only (plus the global PY_UNWIND, filtered by code), so untargeted code pays nothing. On 3.11 it
//! is a C trace function (PyEval_SetTrace) on every thread, filtered by code object.
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
#[inline]
fn current_frame() -> usize {
    // SAFETY: called with the GIL held, from a callback of the running frame; borrowed reference.
    unsafe { ffi::PyEval_GetFrame() as usize }
}

#[cfg(Py_3_12)]
mod imp {
    use super::*;

    #[inline]
    fn dispatch(code: &Bound<'_, PyAny>, f: impl FnOnce(&mut recorder::Recorder, usize, u32)) {
        let ptr = code.as_ptr() as usize;
        recorder::with(|r| {
            if let Some(func) = r.function_of(ptr) {
                f(r, current_frame(), func)
            }
        });
    }

    #[pyfunction]
    fn on_start(code: &Bound<'_, PyAny>, _offset: &Bound<'_, PyAny>) {
        dispatch(code, |r, frame, func| r.on_start(frame, func));
    }

    #[pyfunction]
    fn on_resume(code: &Bound<'_, PyAny>, _offset: &Bound<'_, PyAny>) {
        dispatch(code, |r, frame, func| r.on_resume(frame, func));
    }

    #[pyfunction]
    fn on_line(code: &Bound<'_, PyAny>, line: u32) {
        dispatch(code, |r, frame, func| r.on_line(frame, func, line));
    }

    #[pyfunction]
    fn on_return(code: &Bound<'_, PyAny>, _offset: &Bound<'_, PyAny>, _value: &Bound<'_, PyAny>) {
        dispatch(code, |r, frame, _| r.on_exit(frame, false));
    }

    #[pyfunction]
    fn on_yield(code: &Bound<'_, PyAny>, _offset: &Bound<'_, PyAny>, _value: &Bound<'_, PyAny>) {
        dispatch(code, |r, frame, _| r.on_yield(frame));
    }

    #[pyfunction]
    fn on_unwind(code: &Bound<'_, PyAny>, _offset: &Bound<'_, PyAny>, _exc: &Bound<'_, PyAny>) {
        dispatch(code, |r, frame, _| r.on_exit(frame, true));
    }

    pub fn add_callbacks(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_function(wrap_pyfunction!(on_start, m)?)?;
        m.add_function(wrap_pyfunction!(on_resume, m)?)?;
        m.add_function(wrap_pyfunction!(on_line, m)?)?;
        m.add_function(wrap_pyfunction!(on_return, m)?)?;
        m.add_function(wrap_pyfunction!(on_yield, m)?)?;
        m.add_function(wrap_pyfunction!(on_unwind, m)?)?;
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
}

#[cfg(not(Py_3_12))]
mod imp {
    use super::*;
    use std::collections::HashMap;
    use std::os::raw::c_int;

    /// YIELD_VALUE in CPython 3.11's bytecode.
    const YIELD_VALUE: u8 = 86;
    const GENERATOR_FLAGS: i32 = 0x20 | 0x80 | 0x200; // CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR

    /// Bytecode of targeted generators and coroutines: the trace function reports a yield as a
    /// return and a resume as a call, and the instruction tells them apart.
    static GENERATOR_CODE: Mutex<Option<HashMap<usize, Vec<u8>>>> = Mutex::new(None);

    pub fn add_code(ptr: usize) {
        Python::attach(|py| {
            // SAFETY: ptr is a live code object kept alive by KEEP.
            let code = unsafe { Bound::from_borrowed_ptr(py, ptr as *mut ffi::PyObject) };
            let flags: i32 = code.getattr("co_flags").and_then(|f| f.extract()).unwrap_or(0);
            if flags & GENERATOR_FLAGS != 0 {
                if let Ok(bytes) = code.getattr("co_code").and_then(|b| b.extract::<Vec<u8>>()) {
                    GENERATOR_CODE.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(ptr, bytes);
                }
            }
        });
    }

    fn opcode_at(code: usize, offset: c_int) -> Option<u8> {
        let guard = GENERATOR_CODE.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = guard.as_ref()?.get(&code)?;
        usize::try_from(offset).ok().and_then(|o| bytes.get(o).copied())
    }

    extern "C" fn trace(_obj: *mut ffi::PyObject, frame: *mut ffi::PyFrameObject, what: c_int, arg: *mut ffi::PyObject) -> c_int {
        // SAFETY: the interpreter calls this with the GIL held and a live frame.
        let code = unsafe {
            let code = ffi::PyFrame_GetCode(frame);
            let ptr = code as usize;
            ffi::Py_DECREF(code as *mut ffi::PyObject);
            ptr
        };
        let frame_key = frame as usize;
        recorder::with(|r| {
            let Some(func) = r.function_of(code) else { return };
            match what {
                ffi::PyTrace_LINE => {
                    // SAFETY: live frame, GIL held.
                    let line = unsafe { ffi::PyFrame_GetLineNumber(frame) };
                    r.on_line(frame_key, func, line.max(0) as u32);
                }
                ffi::PyTrace_CALL => {
                    // SAFETY: live frame, GIL held.
                    let lasti = unsafe { ffi::PyFrame_GetLasti(frame) };
                    if opcode_at(code, lasti - 2) == Some(YIELD_VALUE) {
                        r.on_resume(frame_key, func);
                    } else {
                        r.on_start(frame_key, func);
                    }
                }
                ffi::PyTrace_RETURN => {
                    if arg.is_null() {
                        r.on_exit(frame_key, true);
                    } else {
                        // SAFETY: live frame, GIL held.
                        let lasti = unsafe { ffi::PyFrame_GetLasti(frame) };
                        if opcode_at(code, lasti) == Some(YIELD_VALUE) {
                            r.on_yield(frame_key);
                        } else {
                            r.on_exit(frame_key, false);
                        }
                    }
                }
                _ => {}
            }
        });
        0
    }

    pub fn add_callbacks(_m: &Bound<'_, PyModule>) -> PyResult<()> {
        Ok(())
    }

    pub fn on_thread_start(_py: Python<'_>) -> PyResult<()> {
        start_on_this_thread();
        Ok(())
    }

    /// Installs the C trace function on the calling thread (replacing threading's Python hook).
    pub fn start_on_this_thread() {
        // SAFETY: GIL held by the caller.
        unsafe { ffi::PyEval_SetTrace(Some(trace), std::ptr::null_mut()) };
    }

    pub fn stop_on_this_thread() {
        // SAFETY: GIL held by the caller.
        unsafe { ffi::PyEval_SetTrace(None, std::ptr::null_mut()) };
    }
}

pub use imp::*;
