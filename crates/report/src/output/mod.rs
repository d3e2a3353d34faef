//! Where memprof's words and files go: notes on standard error, text on standard output, report
//! files written whole (atomically where the path is a regular file), the paths of a job's ranks,
//! and the terminal's width. Uses `model` and `error`.
pub mod file;
pub mod ranks;
pub mod socket;
pub mod terminal;

use std::io::Write;

/// A line for the user on standard error, in one write: ranks share a terminal.
pub fn note(text: &str) {
    let _ = std::io::stderr().write_all(format!("memprof: {text}\n").as_bytes());
}

/// The standard output that `reserve_stdout` kept for the report (-1: none kept).
static REPORT_STDOUT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Text on standard output, flushed. A closed pipe (`memprof show x | head`) is not an error.
pub fn print(text: &str) {
    let fd = REPORT_STDOUT.load(std::sync::atomic::Ordering::SeqCst);
    if fd >= 0 {
        use std::os::fd::FromRawFd;
        // SAFETY: the descriptor `reserve_stdout` duplicated; ManuallyDrop leaves it open.
        let mut out = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
        let _ = out.write_all(text.as_bytes());
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// A report in a machine format (JSON, YAML, the HTML page) that goes to standard output must be
/// all that is there (`memprof run --format json train.py > report.json`): standard output is
/// kept for it, and the program's standard output from now on is its standard error's file.
/// Call before the program starts. Returns false where the descriptors could not be moved.
pub fn reserve_stdout() -> bool {
    // SAFETY: duplicates fd 1 above the standard descriptors (close-on-exec: the program's
    // children never see it), then points fd 1 at fd 2's file.
    unsafe {
        let kept = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if kept < 0 {
            return false;
        }
        if libc::dup2(2, 1) < 0 {
            libc::close(kept);
            return false;
        }
        REPORT_STDOUT.store(kept, std::sync::atomic::Ordering::SeqCst);
    }
    true
}
