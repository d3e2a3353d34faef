//! `module_enter` and `module_exit` as CPython calls them, at every module call: METH_FASTCALL
//! functions made here rather than by pyo3's `#[pyfunction]`, whose wrapper (its arguments
//! matched by name, the thread's attach count kept in a thread-local, a panic guard) cost some
//! 340 instructions a module call over the work itself (`benches/module_call_instructions.sh`).
//! These take their two positional arguments as CPython passes them, keep the panic guard, and
//! are otherwise what module_calls.rs's functions were: the same names, signatures (`__text_signature__`,
//! which dynamo's `substitute_in_graph` reads) and answers.
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::ffi::CStr;
use std::os::raw::c_char;

/// The signature of a METH_FASTCALL function.
type Fast = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *mut *mut ffi::PyObject,
    ffi::Py_ssize_t,
) -> *mut ffi::PyObject;

/// A function's definition, which CPython reads for the function's whole life: a static (the
/// `_memprof` module is made afresh for each in-process session).
struct Definition(std::cell::UnsafeCell<ffi::PyMethodDef>);

// SAFETY: CPython only reads a definition, with the GIL held; nothing here writes it.
unsafe impl Sync for Definition {}

impl Definition {
    const fn new(name: &'static CStr, doc: &'static CStr, meth: Fast) -> Self {
        Definition(std::cell::UnsafeCell::new(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer {
                PyCFunctionFast: meth,
            },
            ml_flags: ffi::METH_FASTCALL,
            ml_doc: doc.as_ptr(),
        }))
    }
}

static ENTER: Definition = Definition::new(
    c"module_enter",
    c"module_enter(module, args)\n--\n\nA module's forward starts: None, or what Python is asked to do.",
    module_enter,
);
static EXIT: Definition = Definition::new(
    c"module_exit",
    c"module_exit(module, output)\n--\n\nA module's forward ends: None, or what Python is asked to do.",
    module_exit,
);

/// Adds the function of `definition` to `m`, as `name`.
fn add(m: &Bound<'_, PyModule>, name: &str, definition: &'static Definition) -> PyResult<()> {
    let py = m.py();
    let module_name = m.name()?;
    // SAFETY: the definition is static; the module and its name are live objects; the GIL is
    // held.
    let function = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyCFunction_NewEx(definition.0.get(), m.as_ptr(), module_name.as_ptr()),
        )?
    };
    m.add(name, function)
}

/// The two arguments of a call, or a TypeError set (NULL returned by the caller).
///
/// # Safety
/// `args` holds `nargs` borrowed references, as CPython passes them; the GIL is held.
unsafe fn two(
    name: &str,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> Option<(*mut ffi::PyObject, *mut ffi::PyObject)> {
    if nargs == 2 {
        return Some((*args, *args.add(1)));
    }
    let verb = if nargs == 1 { "was" } else { "were" };
    let message = format!("{name}() takes 2 positional arguments but {nargs} {verb} given\0");
    ffi::PyErr_SetString(ffi::PyExc_TypeError, message.as_ptr() as *const c_char);
    None
}

/// Runs `f` with a panic guard: a panic becomes a RuntimeError (NULL returned), as pyo3's
/// wrapper made it, instead of unwinding into CPython.
fn guarded(f: impl FnOnce() -> *mut ffi::PyObject) -> *mut ffi::PyObject {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        // SAFETY: the GIL is held (the caller is CPython calling this function).
        unsafe {
            ffi::PyErr_SetString(
                ffi::PyExc_RuntimeError,
                c"memprof: an internal error in a module call's bookkeeping".as_ptr(),
            )
        };
        std::ptr::null_mut()
    })
}

/// A new reference to what a hook answers: None, or its tuple.
fn answer<'py, T: pyo3::conversion::IntoPyObjectExt<'py>>(
    py: Python<'py>,
    value: Option<T>,
) -> *mut ffi::PyObject {
    match value.map(|v| v.into_bound_py_any(py)) {
        None => py.None().into_ptr(),
        Some(Ok(tuple)) => tuple.into_ptr(),
        Some(Err(e)) => {
            e.restore(py);
            std::ptr::null_mut()
        }
    }
}

/// A function's body: `f` with its two arguments (borrowed, as `Bound`s), under the panic guard;
/// a wrong count is a TypeError.
///
/// # Safety
/// As CPython calls a METH_FASTCALL function: the GIL held, `nargs` borrowed arguments.
unsafe fn with_two(
    name: &str,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    f: impl FnOnce(Python<'_>, Bound<'_, PyAny>, Bound<'_, PyAny>) -> *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    guarded(|| {
        // SAFETY: the caller's contract: the GIL is held, so the thread is attached.
        let py = unsafe { Python::assume_attached() };
        let Some((first, second)) = (unsafe { two(name, args, nargs) }) else {
            return std::ptr::null_mut();
        };
        // SAFETY: borrowed references, alive for the call.
        let (first, second) = unsafe {
            (
                Bound::from_borrowed_ptr(py, first),
                Bound::from_borrowed_ptr(py, second),
            )
        };
        f(py, first, second)
    })
}

unsafe extern "C" fn module_enter(
    _module: *mut ffi::PyObject,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    let body = |py: Python<'_>, module: Bound<'_, PyAny>, call_args: Bound<'_, PyAny>| {
        let Ok(call_args) = call_args.cast::<PyTuple>() else {
            // SAFETY: the GIL is held.
            unsafe {
                ffi::PyErr_SetString(
                    ffi::PyExc_TypeError,
                    c"module_enter(): args must be a tuple".as_ptr(),
                )
            };
            return std::ptr::null_mut();
        };
        answer(py, super::module_calls::module_enter(&module, call_args))
    };
    // SAFETY: CPython calls this as a METH_FASTCALL function.
    unsafe { with_two("module_enter", args, nargs, body) }
}

unsafe extern "C" fn module_exit(
    _module: *mut ffi::PyObject,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    let body = |py: Python<'_>, module: Bound<'_, PyAny>, output: Bound<'_, PyAny>| {
        answer(py, super::module_calls::module_exit(&module, &output))
    };
    // SAFETY: CPython calls this as a METH_FASTCALL function.
    unsafe { with_two("module_exit", args, nargs, body) }
}

pub fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add(m, "module_enter", &ENTER)?;
    add(m, "module_exit", &EXIT)
}
