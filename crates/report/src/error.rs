//! memprof's error type and the exit codes it documents.
use std::fmt;

/// Exit codes: 0 success (or the script's own `SystemExit` code), 1 the script raised,
/// 2 a memprof error (bad flags, missing script, syntax error, mismatched torch), 3 the script
/// finished but a `--max` budget was exceeded, 4 `memprof diff` found an increase beyond
/// `--max-increase`, 5 `memprof fit` predicts an out-of-memory error, 130 interrupted by SIGINT. `TERMINATED` (143) is what a report written on
/// SIGTERM records: the process itself then dies of SIGTERM, as python does (the shell's 143).
pub mod exit_code {
    pub const SCRIPT_RAISED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const BUDGET_EXCEEDED: i32 = 3;
    pub const INCREASE_EXCEEDED: i32 = 4;
    pub const DOES_NOT_FIT: i32 = 5;
    pub const INTERRUPTED: i32 = 130;
    pub const TERMINATED: i32 = 143;
}

/// A memprof error: a message, an optional hint on how to fix it, and the exit code.
#[derive(Debug)]
pub struct Error {
    pub message: String,
    pub hint: Option<String>,
    pub code: i32,
}

impl Error {
    /// A usage error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            hint: None,
            code: exit_code::USAGE,
        }
    }

    /// Adds the line that says how to fix it.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "memprof: error: {}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::usage(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;
