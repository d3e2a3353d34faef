//! Where memprof's words and files go: notes on standard error, text on standard output, report
//! files written whole (atomically where the path is a regular file), the paths of a job's ranks,
//! and the terminal's width. Uses `model` and `error`.
pub mod file;
pub mod ranks;
pub mod terminal;
