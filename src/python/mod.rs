//! The embedded CPython: starting it like `python`, the `_memprof` module, the line hook, the
//! `--tensors` trigger, and running the user's program.
mod interpreter;
mod inventory;
mod module;
pub mod runner;
mod tracing;
