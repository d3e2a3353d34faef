//! Pure functions on the model: budgets (`--max`), the checkpoint plan, out-of-memory
//! suggestions, merging ranks' reports, diffing two runs, and the CUDA caching allocator's model
//! (`memprof fit`). They read and return model values;
//! they print nothing and touch no file. Uses `model` and `error`.
pub mod allocator;
pub mod budgets;
pub mod checkpoints;
pub mod diff;
pub mod limits;
pub mod merge;
pub mod oom;
pub mod peaks;
pub mod rank_outliers;
