//! `memprof run`, the one subcommand that runs a program (the others only read report files:
//! `memprof_report::commands`). Uses `cli`, `session`, `analysis`, `render`, `output`, `capture`
//! (signals), `torch` (device count) and `model`.
pub(crate) mod answer;
mod live;
pub mod run;
mod simulated;
