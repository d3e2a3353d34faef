//! What the wheel's `memprof` command (src/wheel/memprof/_launcher.py) hands the binary: the
//! Python that started it, and the environment to give back to the script before it starts.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static PYTHON: OnceLock<PathBuf> = OnceLock::new();

/// Takes the launcher's variables out of the environment and puts back the LD_LIBRARY_PATH the
/// user had, so the script sees the environment it would see without memprof. The loader keeps
/// the launcher's path for memprof's own libraries. Call first in main, before any thread starts.
pub fn take_over() {
    let Some(ld) = std::env::var_os("MEMPROF_LAUNCHER_LD_LIBRARY_PATH") else {
        return;
    };
    let ld = ld.to_string_lossy().into_owned();
    match ld.strip_prefix("set:") {
        Some(old) => std::env::set_var("LD_LIBRARY_PATH", old),
        None => std::env::remove_var("LD_LIBRARY_PATH"),
    }
    std::env::remove_var("MEMPROF_LAUNCHER_LD_LIBRARY_PATH");
    if let Some(python) = std::env::var_os("MEMPROF_LAUNCHER_PYTHON") {
        let _ = PYTHON.set(PathBuf::from(python));
        std::env::remove_var("MEMPROF_LAUNCHER_PYTHON");
    }
}

/// The Python whose `memprof` command started this binary, when the wheel's launcher did.
pub fn python() -> Option<&'static Path> {
    PYTHON.get().map(PathBuf::as_path)
}
