//! Functions of the running interpreter's C API that not every Python memprof serves has (the
//! code and dict watchers, 3.12+): found at run time, so that one build serves every Python.
use std::os::raw::c_void;

/// The function of this process's interpreter named `name`: None where this Python has none.
pub fn python_function(name: &std::ffi::CStr) -> Option<*mut c_void> {
    // SAFETY: looks a symbol up in the process.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!found.is_null()).then_some(found)
}
