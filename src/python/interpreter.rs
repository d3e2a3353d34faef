//! Starting the embedded CPython so that it is the user's `python`: the active virtualenv's
//! interpreter (so `sys.executable`, site-packages and spawned workers are the venv's), the
//! script's `sys.argv`, and no signal handlers of its own (memprof owns SIGINT and SIGTERM).
use crate::error::{Error, Result};
use pyo3::ffi;
use std::ffi::CString;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

/// The Python minor version memprof was built for, e.g. "3.11".
pub fn built_for() -> String {
    env!("MEMPROF_PYTHON_VERSION").to_string()
}

/// The interpreter the user would get from `python`: the one whose `memprof` command started
/// this binary (the wheel's), else the active venv's, else `python3` on PATH.
pub fn find_python() -> Result<PathBuf> {
    if let Some(python) = crate::python::launcher::python() {
        return Ok(python.to_path_buf());
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        for name in ["python", "python3"] {
            let p = Path::new(&venv).join("bin").join(name);
            if p.exists() {
                return Ok(p);
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            for name in ["python3", "python"] {
                let p = dir.join(name);
                if p.is_file() {
                    return Ok(p);
                }
            }
        }
    }
    Err(
        Error::usage("no Python interpreter found (no active virtualenv and no python3 on PATH)")
            .hint(format!(
                "activate the virtualenv that has torch (Python {})",
                built_for()
            )),
    )
}

fn status_error(status: &ffi::PyStatus, python: &Path) -> Error {
    let msg = if status.err_msg.is_null() {
        "unknown error".to_string()
    } else {
        // SAFETY: err_msg is a NUL-terminated static string set by CPython.
        unsafe {
            std::ffi::CStr::from_ptr(status.err_msg)
                .to_string_lossy()
                .into_owned()
        }
    };
    Error::usage(format!("could not start Python from '{}': {msg}", python.display())).hint(format!(
        "memprof was built for Python {}; activate a virtualenv of that version, or rebuild memprof \
         inside yours (`cargo install --path .` with it active)",
        built_for()
    ))
}

/// Whether a Python interpreter is already running in this process (the native core was loaded
/// as an extension: the wheel's `memprof run`).
pub fn is_running() -> bool {
    // SAFETY: a plain query of the interpreter's state.
    unsafe { ffi::Py_IsInitialized() != 0 }
}

/// Takes over the running interpreter for the script, as `initialize` starts one: `sys.argv`
/// is `argv` (argv[0] is the script or `-m`). The launcher has already taken its own entry off
/// `sys.path` and given the script a fresh `__main__`.
pub fn adopt(argv: &[String]) -> Result<()> {
    use pyo3::types::PyAnyMethods;
    pyo3::Python::attach(|py| {
        py.import("sys")
            .and_then(|sys| sys.setattr("argv", argv.to_vec()))
            .map_err(|e| Error::usage(format!("could not set sys.argv: {e}")))
    })
}

/// Initialises CPython as `python` would start for `argv` (argv[0] is the script or `-m`).
pub fn initialize(python: &Path, argv: &[String]) -> Result<()> {
    let program = CString::new(python.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::usage("the Python path contains a NUL byte"))?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| {
            CString::new(a.as_bytes())
                .map_err(|_| Error::usage(format!("argument {a:?} contains a NUL byte")))
        })
        .collect::<Result<_>>()?;
    let mut arg_ptrs: Vec<*const std::os::raw::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    // SAFETY: the PyConfig API is used as documented: init, set fields, initialize, clear.
    unsafe {
        let mut config = MaybeUninit::<ffi::PyConfig>::uninit();
        ffi::PyConfig_InitPythonConfig(config.as_mut_ptr());
        let mut config = config.assume_init();
        config.install_signal_handlers = 0;
        config.parse_argv = 0;
        // Setting program_name to the venv's python makes getpath find its pyvenv.cfg.
        let cfg = &mut config as *mut ffi::PyConfig;
        let status = ffi::PyConfig_SetBytesString(cfg, &mut (*cfg).program_name, program.as_ptr());
        if ffi::PyStatus_Exception(status) != 0 {
            ffi::PyConfig_Clear(cfg);
            return Err(status_error(&status, python));
        }
        let status = ffi::PyConfig_SetBytesArgv(
            cfg,
            arg_ptrs.len() as ffi::Py_ssize_t,
            arg_ptrs.as_mut_ptr(),
        );
        if ffi::PyStatus_Exception(status) != 0 {
            ffi::PyConfig_Clear(cfg);
            return Err(status_error(&status, python));
        }
        let status = ffi::Py_InitializeFromConfig(cfg);
        ffi::PyConfig_Clear(cfg);
        if ffi::PyStatus_Exception(status) != 0 {
            return Err(status_error(&status, python));
        }
        // Release the GIL so that Python::attach can take it.
        ffi::PyEval_SaveThread();
    }
    Ok(())
}
