//! memprof's reports, with neither libtorch nor Python: the report schema (model), the command
//! line (cli), the analyses (analysis), the renderings (render), terminal and file output
//! (output), errors and exit codes, and the commands that only read report files (commands:
//! show, merge, diff, plot, stats, completions). The `memprof` binary is these alone, so that
//! they start at once; `run` is the native core's (the root crate), which builds on them.
pub mod analysis;
pub mod cli;
pub mod commands;
pub mod error;
pub mod model;
pub mod output;
pub mod render;
