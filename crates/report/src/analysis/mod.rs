//! Pure functions on the model: budgets (`--max`), the checkpoint plan, out-of-memory
//! suggestions, merging ranks' reports and diffing two runs. They read and return model values;
//! they print nothing and touch no file. Uses `model` and `error`.
pub mod budgets;
pub mod checkpoints;
pub mod diff;
pub mod limits;
pub mod merge;
pub mod oom;
pub mod peaks;
