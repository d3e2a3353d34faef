//! Where memprof's words and files go: notes on standard error, text on standard output, report
//! files written whole (atomically where the path is a regular file), the paths of a job's ranks,
//! and the terminal's width. Uses `model` and `error`.
pub mod file;
pub mod ranks;
pub mod terminal;

use std::io::Write;

/// A line for the user on standard error, in one write: ranks share a terminal.
pub fn note(text: &str) {
    let _ = std::io::stderr().write_all(format!("memprof: {text}\n").as_bytes());
}

/// Text on standard output, flushed. A closed pipe (`memprof show x | head`) is not an error.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}
