//! The run's report so far, on demand while the program runs (`@memprof.profile()` under
//! `memprof run` reads it after each call): what makes it is the session's, registered by the
//! command, which knows the run's configuration.

use std::sync::OnceLock;

/// Makes the report so far as JSON; None when the recorder cannot give it.
pub type ReportSoFar = Box<dyn Fn() -> Option<String> + Send + Sync>;

static REPORT_SO_FAR: OnceLock<ReportSoFar> = OnceLock::new();

/// Registers what makes the report so far (once per run).
pub fn set(f: ReportSoFar) {
    let _ = REPORT_SO_FAR.set(f);
}

/// The report so far as JSON, when a run registered how to make it.
pub fn report() -> Option<String> {
    REPORT_SO_FAR.get().and_then(|f| f())
}
