//! One profiling session: the recorder installed, the program run under it (through `python`),
//! and the report model built from what both gathered. Uses `python`, `capture`, `analysis`,
//! `model`, `torch` and `error`.
pub mod build;
pub mod sections;
