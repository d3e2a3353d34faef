//! memprof's integration tests, in one binary (one link of libtorch and libpython, not one per
//! file): each module runs the real memprof binary on real Python and torch (`common`), on the
//! CPU here and on `cuda:0` on the GPU machine (`MEMPROF_TEST_DEVICE=cuda`).
mod common;

mod attach;
mod budgets;
mod categories;
mod compiled;
mod conformance;
mod errors;
mod first_hour;
mod fit;
mod gather;
mod gpu;
mod history;
mod html;
mod inprocess;
mod live;
mod long_runs;
mod measure;
mod memlab_api;
mod merge_scale;
mod module_level;
mod modules;
mod oom;
mod output;
mod peak;
mod plot;
mod ranks;
mod run_as_python;
mod running;
mod schedule;
mod second_hour;
mod signals;
mod simulate;
mod snapshot;
mod tensors;
mod third_hour;
mod tracker_thread;
