//! Ctrl-C and SIGTERM. The first signal raises KeyboardInterrupt in the script (so `finally`
//! blocks run and memprof still prints the report of what ran); a second one exits at once,
//! after a best-effort report written from Rust's data alone (the main thread may be stuck in a
//! CUDA synchronisation or holding the GIL).
use crate::error::{exit_code, Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

static SIGNALS: AtomicU32 = AtomicU32::new(0);
static TERMINATED: AtomicBool = AtomicBool::new(false);
static SCRIPT_RUNNING: AtomicBool = AtomicBool::new(false);
static EMERGENCY_REPORT: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

/// Whether a signal arrived, and which exit code it calls for.
pub fn received() -> Option<i32> {
    if SIGNALS.load(Ordering::SeqCst) == 0 {
        None
    } else if TERMINATED.load(Ordering::SeqCst) {
        Some(exit_code::TERMINATED)
    } else {
        Some(exit_code::INTERRUPTED)
    }
}

/// While true, the first signal is turned into KeyboardInterrupt in the script.
pub fn set_script_running(running: bool) {
    SCRIPT_RUNNING.store(running, Ordering::SeqCst);
}

/// What a second signal writes before exiting.
pub fn set_emergency_report(f: Box<dyn Fn() + Send + Sync>) {
    let _ = EMERGENCY_REPORT.set(f);
}

fn first_signal() {
    if SCRIPT_RUNNING.load(Ordering::SeqCst) {
        // SAFETY: async-signal-safe and needs no GIL (CPython docs).
        unsafe { pyo3::ffi::PyErr_SetInterruptEx(libc::SIGINT) };
    }
}

fn on_sigint() {
    if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
        first_signal();
        return;
    }
    eprintln!("\nmemprof: interrupted again, exiting now");
    if let Some(report) = EMERGENCY_REPORT.get() {
        report();
    }
    let code = if TERMINATED.load(Ordering::SeqCst) {
        exit_code::TERMINATED
    } else {
        exit_code::INTERRUPTED
    };
    // SAFETY: exits the process without running destructors: the main thread may be stuck.
    unsafe { libc::_exit(code) };
}

extern "C" fn on_sigterm(_: libc::c_int) {
    // Only async-signal-safe work here: atomics, PyErr_SetInterruptEx, _exit.
    TERMINATED.store(true, Ordering::SeqCst);
    if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
        first_signal();
    } else {
        // SAFETY: async-signal-safe.
        unsafe { libc::_exit(exit_code::TERMINATED) };
    }
}

/// Installs the handlers. Python's own SIGINT handler must already be `default_int_handler`
/// (so that PyErr_SetInterruptEx raises KeyboardInterrupt); this then takes the OS-level handler.
pub fn install() -> Result<()> {
    ctrlc::set_handler(on_sigint)
        .map_err(|e| Error::usage(format!("cannot install the Ctrl-C handler: {e}")))?;
    // SAFETY: installs a handler that only does async-signal-safe work.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigterm as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut()) != 0 {
            return Err(Error::usage("cannot install the SIGTERM handler"));
        }
    }
    Ok(())
}
