//! The model: what a run measured and what memprof writes (the report, a merged report, a diff,
//! an allocation trace and its replay),
//! the catalogue of stats, the device chosen, and sizes as people write them. The bottom layer:
//! it uses nothing of memprof's but `error`.
pub mod children;
pub mod compiled;
pub mod device;
pub mod diff;
pub mod gpus;
pub mod growth;
pub mod live;
pub mod merged;
pub mod paths;
pub mod peak;
pub mod prediction;
pub mod profile;
pub mod saved;
pub mod stats;
pub mod timeline;
pub mod trace;
pub mod units;
