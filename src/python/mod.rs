//! The embedded CPython: starting it like `python` (interpreter, launcher), the `_memprof` module
//! the bootstrap talks to (ext), the C API functions found at run time (c_api), the line hook
//! per Python version (tracing), the embedded Python files (py/), and running the user's program
//! (runner). Uses `capture`, `torch`, `model` and `error`.
pub mod c_api;
pub mod ext;
mod interpreter;
pub mod launcher;
pub mod runner;
pub mod sites;
// Compiled for tests everywhere; exported under its C names only in a static 3.12 build.
#[cfg(any(memprof_static_sha2, test))]
mod static_sha2;
pub mod tracing;

/// Exits the process (as python does after an uncaught KeyboardInterrupt: by SIGINT); if
/// memprof started Python, with the GIL held. Static destructors of
/// libtorch objects that hold Python references (DTensor's and FSDP's, say) release them at
/// exit, and CPython aborts the process ("PyThreadState_Get: ... the GIL is released") if the
/// exiting thread does not hold the GIL. Python itself is never finalized: PyO3 does not.
pub fn exit(code: i32) -> ! {
    // SAFETY: a plain query of the interpreter's state.
    if unsafe { pyo3::ffi::Py_IsInitialized() } != 0 {
        pyo3::Python::attach(|_| crate::capture::interrupt::exit(code))
    }
    crate::capture::interrupt::exit(code)
}
