//! The line hook on Python 3.11: a frame-evaluation hook finds targeted frames and puts a C trace
//! function on their threads only while targeted code runs.
use super::*;
use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// YIELD_VALUE in CPython 3.11's bytecode.
const YIELD_VALUE: u8 = 86;
const GENERATOR_FLAGS: i32 = 0x20 | 0x80 | 0x200; // CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR

/// Bytecode of targeted generators and coroutines: the trace function reports a yield as a
/// return and a resume as a call, and the instruction tells them apart.
static GENERATOR_CODE: Mutex<Option<HashMap<usize, Vec<u8>>>> = Mutex::new(None);

/// Whether any code is targeted: until then there is no hook and no trace function (a
/// trace function slows every line of every frame on 3.11), so a run with nothing targeted
/// runs as fast as without memprof.
static TARGETED: AtomicBool = AtomicBool::new(false);
/// Whether the script has started; hooks go on only from then.
static SCRIPT_STARTED: AtomicBool = AtomicBool::new(false);
/// Whether the frame-evaluation hook puts the trace function on targeted frames' threads
/// (false: not yet, or the schedule is complete, or the fallback below is in use).
static HOOK_ACTIVE: AtomicBool = AtomicBool::new(false);
/// The fallback when this interpreter's thread state does not look as memprof expects
/// (another 3.11 build): the trace function on every thread, all the time, as before the
/// hook existed. Correct, and several times slower on untargeted code.
static TRACE_EVERYWHERE: AtomicBool = AtomicBool::new(false);

/// Targeted code objects for the hook's test, published as a leaked, immutable list that is
/// replaced when a target is added (rare): the test is one load and a short scan. FILTER
/// has one bit per address hash, so that most frames are dismissed by a single bit test.
static TARGET_CODES: AtomicPtr<Vec<usize>> = AtomicPtr::new(std::ptr::null_mut());
static FILTER: AtomicU64 = AtomicU64::new(0);

fn filter_bit(code: usize) -> u64 {
    1u64 << ((code >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
}

fn publish_target(code: usize) {
    let old = TARGET_CODES.load(Ordering::Acquire);
    // SAFETY: published lists are leaked, never freed, so a reader's pointer stays valid.
    let mut codes = if old.is_null() {
        Vec::new()
    } else {
        unsafe { (*old).clone() }
    };
    codes.push(code);
    TARGET_CODES.store(Box::into_raw(Box::new(codes)), Ordering::Release);
    FILTER.fetch_or(filter_bit(code), Ordering::Release);
}

#[inline]
fn is_target(code: usize) -> bool {
    if FILTER.load(Ordering::Relaxed) & filter_bit(code) == 0 {
        return false;
    }
    let codes = TARGET_CODES.load(Ordering::Acquire);
    // SAFETY: see publish_target.
    !codes.is_null() && unsafe { (*codes).contains(&code) }
}

pub fn add_code(ptr: usize) {
    publish_target(ptr);
    Python::attach(|py| {
        if !TARGETED.swap(true, Ordering::SeqCst) && SCRIPT_STARTED.load(Ordering::SeqCst) {
            // The first target, found while the program runs (an import, @profile).
            activate(py);
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
    count_event();
    let code = code_of(frame as usize);
    let frame_key = frame as usize;
    let (ended, finished) = recorder::with(|r| {
        let Some(func) = r.function_of(code) else {
            let thread = current_thread();
            // Every frame's events reach a C trace function: the caller's line or return
            // ends the calls that returned to it. (Exceptions are reported: RETURN with NULL.)
            if r.has_returning() && (what == ffi::PyTrace_LINE || what == ffi::PyTrace_RETURN) {
                r.on_caller_event(frame_key, thread);
            }
            // A call of Python code: its caller moved on. (Calls of C functions reach only a
            // profile function, not a trace function, on 3.11.)
            if r.has_returning() && what == ffi::PyTrace_CALL {
                if let Some(caller) = caller_of(frame_key) {
                    r.on_caller_event(caller, thread);
                }
            }
            // Outside targeted frames, with nothing left to settle here: the thread runs
            // untraced until the hook sees its next targeted frame.
            if HOOK_ACTIVE.load(Ordering::Relaxed)
                && TARGET_DEPTH.get() == 0
                && r.settled_on(thread)
            {
                // SAFETY: called by the interpreter on this thread, GIL held.
                unsafe { trace_off(ffi::PyThreadState_Get()) };
            }
            r.history_poll();
            return (r.take_ended(), r.take_finished());
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
        r.history_poll();
        (r.take_ended(), r.take_finished())
    })
    .unwrap_or((None, false));
    if ended.is_some() || finished {
        // SAFETY: the interpreter calls the trace function with the GIL held.
        let py = unsafe { Python::assume_attached() };
        after_event(py, ended, finished);
    }
    0
}

pub fn add_callbacks(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}

/// A new thread: threading's Python hook is removed (the frame-evaluation hook reaches
/// every thread), or in the fallback the C trace function replaces it.
pub fn on_thread_start(_py: Python<'_>) -> PyResult<()> {
    let func: Option<ffi::Py_tracefunc> = if TRACE_EVERYWHERE.load(Ordering::SeqCst) {
        Some(trace)
    } else {
        None
    };
    // SAFETY: GIL held by the caller.
    unsafe { ffi::PyEval_SetTrace(func, std::ptr::null_mut()) };
    Ok(())
}

/// The script starts on the calling thread: the hooks go on if any code is targeted (else
/// when the first target is found).
pub fn start_on_this_thread() {
    SCRIPT_STARTED.store(true, Ordering::SeqCst);
    if TARGETED.load(Ordering::SeqCst) {
        // SAFETY: called with the GIL held (the runner, before the script runs).
        activate(unsafe { Python::assume_attached() });
    }
}

/// No code is targeted any more, and the script has not started (an in-process session's end).
pub fn reset_targets() {
    TARGET_CODES.store(std::ptr::null_mut(), Ordering::Release);
    FILTER.store(0, Ordering::Release);
    TARGETED.store(false, Ordering::SeqCst);
    SCRIPT_STARTED.store(false, Ordering::SeqCst);
    if let Some(codes) = GENERATOR_CODE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
    {
        codes.clear();
    }
}

/// The script has ended: no more hooks. A trace function that is not memprof's (coverage's, a
/// debugger's) stays: under `memprof.profile` the program goes on.
pub fn stop_on_this_thread() {
    let everywhere = TRACE_EVERYWHERE.load(Ordering::SeqCst);
    deactivate();
    // SAFETY: GIL held by the caller; this thread's state.
    unsafe { remove_own_trace(ffi::PyThreadState_Get(), everywhere) };
}

/// Takes memprof's trace function off `tstate`, through the API (which recomputes the thread's
/// `use_tracing`), and leaves any other. In the fallback (`everywhere`: this build's thread
/// state is not laid out as memprof reads it) memprof put its own on every thread, over any
/// other, and takes whatever is there off.
unsafe fn remove_own_trace(tstate: *mut ffi::PyThreadState, everywhere: bool) {
    // SAFETY: GIL held by the callers. Without the fallback the layout was checked when the hook
    // went on (`layout_matches`), or memprof's trace function was never set and the field read
    // (inside the thread state) cannot hold it.
    unsafe {
        let ts = tstate as *mut ThreadState;
        let own =
            (*ts).c_tracefunc.map(|f| f as usize) == Some(trace as ffi::Py_tracefunc as usize);
        if everywhere || own {
            _PyEval_SetTrace(tstate, None, std::ptr::null_mut());
        }
    }
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

/// Removes the hook, and memprof's trace function from every thread (another's stays), so that
/// code runs as without memprof from now on.
pub fn stop_on_all_threads(py: Python<'_>) {
    let everywhere = TRACE_EVERYWHERE.load(Ordering::SeqCst);
    deactivate();
    // SAFETY: each thread state is live while walked, GIL held.
    for_each_thread(py, |ts| unsafe { remove_own_trace(ts, everywhere) });
}

// --- the frame-evaluation hook (PEP 523) ----------------------------------------------

/// CPython 3.11's `_PyInterpreterFrame`, as far as the hook reads it.
#[repr(C)]
struct InterpreterFrame {
    f_func: *mut ffi::PyObject,
    f_globals: *mut ffi::PyObject,
    f_builtins: *mut ffi::PyObject,
    f_locals: *mut ffi::PyObject,
    f_code: *mut ffi::PyObject,
}

/// CPython 3.11's `_PyCFrame`: its first byte says whether the running evaluation traces.
#[repr(C)]
struct CFrame {
    use_tracing: u8,
}

/// CPython 3.11's `PyThreadState` (`struct _ts`, Include/cpython/pystate.h) up to the trace
/// function's fields: what `_PyEval_SetTrace` writes, written here without its audit event
/// (a program with audit hooks would see `sys.settrace` at every targeted call).
#[repr(C)]
struct ThreadState {
    prev: *mut ffi::PyThreadState,
    next: *mut ffi::PyThreadState,
    interp: *mut ffi::PyInterpreterState,
    initialized: c_int,
    is_static: c_int,
    recursion_remaining: c_int,
    recursion_limit: c_int,
    recursion_headroom: c_int,
    tracing: c_int,
    tracing_what: c_int,
    cframe: *mut CFrame,
    c_profilefunc: Option<ffi::Py_tracefunc>,
    c_tracefunc: Option<ffi::Py_tracefunc>,
    c_profileobj: *mut ffi::PyObject,
    c_traceobj: *mut ffi::PyObject,
}

type EvalFrame = unsafe extern "C" fn(
    *mut ffi::PyThreadState,
    *mut InterpreterFrame,
    c_int,
) -> *mut ffi::PyObject;

extern "C" {
    fn _PyEval_EvalFrameDefault(
        tstate: *mut ffi::PyThreadState,
        frame: *mut InterpreterFrame,
        throwflag: c_int,
    ) -> *mut ffi::PyObject;
    fn _PyInterpreterState_SetEvalFrameFunc(
        interp: *mut ffi::PyInterpreterState,
        eval_frame: EvalFrame,
    );
    fn _PyInterpreterState_GetEvalFrameFunc(interp: *mut ffi::PyInterpreterState) -> EvalFrame;
}

thread_local! {
    /// Targeted frames being evaluated on this thread (generators count while they run).
    static TARGET_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Every Python frame of every thread starts (or resumes) here while the hook is installed.
/// Untargeted frames go straight to the interpreter; a targeted one gets the trace function
/// on its thread first, which sees its call and lines, and stays until its caller has moved
/// on (see `trace`). The price: with any such hook CPython 3.11 does not inline
/// Python-to-Python calls.
unsafe extern "C" fn evaluate(
    tstate: *mut ffi::PyThreadState,
    frame: *mut InterpreterFrame,
    throwflag: c_int,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter passes a live frame and this thread's state, GIL held.
    unsafe {
        if !HOOK_ACTIVE.load(Ordering::Relaxed) || !is_target((*frame).f_code as usize) {
            return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
        }
        TARGET_DEPTH.set(TARGET_DEPTH.get() + 1);
        trace_on(tstate);
        let result = _PyEval_EvalFrameDefault(tstate, frame, throwflag);
        TARGET_DEPTH.set(TARGET_DEPTH.get() - 1);
        result
    }
}

/// Puts memprof's trace function on this thread, unless it is there or the program has its
/// own (a debugger's: it keeps the thread, as it would replace memprof's anyway).
unsafe fn trace_on(tstate: *mut ffi::PyThreadState) {
    // SAFETY: this thread's state, GIL held; the layout was checked by `activate`.
    unsafe {
        let ts = tstate as *mut ThreadState;
        if let Some(f) = (*ts).c_tracefunc {
            if f as usize != trace as ffi::Py_tracefunc as usize {
                super::FOREIGN_TRACER.store(true, Ordering::Relaxed);
            }
            return;
        }
        (*ts).c_traceobj = std::ptr::null_mut();
        (*ts).c_tracefunc = Some(trace);
        if (*ts).tracing == 0 {
            (*(*ts).cframe).use_tracing = 255;
        }
    }
}

/// Takes memprof's trace function off this thread, from inside a call of it: the
/// interpreter recomputes `use_tracing` when the call returns.
unsafe fn trace_off(tstate: *mut ffi::PyThreadState) {
    // SAFETY: this thread's state, GIL held; the layout was checked by `activate`.
    unsafe {
        let ts = tstate as *mut ThreadState;
        if (*ts).c_tracefunc.map(|f| f as usize) == Some(trace as ffi::Py_tracefunc as usize) {
            (*ts).c_tracefunc = None;
            (*ts).c_traceobj = std::ptr::null_mut();
        }
    }
}

/// Whether this interpreter's thread state has the fields where `ThreadState` says: set a
/// trace function through the API and read it back.
fn layout_matches() -> bool {
    static CHECKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CHECKED.get_or_init(check_layout)
}

/// `layout_matches`, once per process. A thread with a trace function of its own (coverage's, a
/// debugger's, under `memprof.profile`) keeps it: the fields are compared with what
/// `sys.gettrace()` says instead of being written.
fn check_layout() -> bool {
    // SAFETY: GIL held by the callers; the fields read are inside the thread state.
    unsafe {
        let tstate = ffi::PyThreadState_Get();
        let ts = tstate as *mut ThreadState;
        if (*ts).tracing != 0 {
            return false;
        }
        if (*ts).c_tracefunc.is_some() {
            let py = Python::assume_attached();
            let current = py
                .import("sys")
                .and_then(|sys| sys.call_method0("gettrace"))
                .map(|t| t.as_ptr())
                .unwrap_or(std::ptr::null_mut());
            return !current.is_null() && current != ffi::Py_None() && current == (*ts).c_traceobj;
        }
        ffi::PyEval_SetTrace(Some(trace), std::ptr::null_mut());
        let seen = (*ts).c_tracefunc.map(|f| f as usize)
            == Some(trace as ffi::Py_tracefunc as usize)
            && (*(*ts).cframe).use_tracing == 255;
        ffi::PyEval_SetTrace(None, std::ptr::null_mut());
        seen && (*(*ts).cframe).use_tracing == 0
    }
}

/// The first target while the script runs: install the hook (or the fallback).
fn activate(py: Python<'_>) {
    if HOOK_ACTIVE.load(Ordering::SeqCst) || TRACE_EVERYWHERE.load(Ordering::SeqCst) {
        return;
    }
    if layout_matches() {
        // SAFETY: GIL held; the interpreter of this thread.
        unsafe {
            _PyInterpreterState_SetEvalFrameFunc(ffi::PyInterpreterState_Get(), evaluate);
        }
        HOOK_ACTIVE.store(true, Ordering::SeqCst);
    } else {
        TRACE_EVERYWHERE.store(true, Ordering::SeqCst);
        // SAFETY: each thread state is live while walked, GIL held.
        for_each_thread(py, |ts| unsafe {
            _PyEval_SetTrace(ts, Some(trace), std::ptr::null_mut());
        });
    }
}

/// No more targeted frames: the interpreter's own evaluation comes back (with its inlined
/// calls), unless another hook (torch.compile's) has been put over memprof's; memprof's
/// then passes every frame through.
fn deactivate() {
    HOOK_ACTIVE.store(false, Ordering::SeqCst);
    TRACE_EVERYWHERE.store(false, Ordering::SeqCst);
    // SAFETY: GIL held by the callers; the interpreter of this thread.
    unsafe {
        let interp = ffi::PyInterpreterState_Get();
        if _PyInterpreterState_GetEvalFrameFunc(interp) as usize == evaluate as EvalFrame as usize {
            _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
        }
    }
}

/// Calls `f` with every thread state of this interpreter (GIL held: they are walked under it).
fn for_each_thread(_py: Python<'_>, mut f: impl FnMut(*mut ffi::PyThreadState)) {
    // SAFETY: GIL held (the Python token); thread states are walked under it.
    unsafe {
        let interp = ffi::PyInterpreterState_Get();
        let mut ts = ffi::PyInterpreterState_ThreadHead(interp);
        while !ts.is_null() {
            f(ts);
            ts = ffi::PyThreadState_Next(ts);
        }
    }
}
