//! The model: what a run measured and what memprof writes (the report, a merged report, a diff),
//! the catalogue of stats, the device chosen, and sizes as people write them. The bottom layer:
//! it uses nothing of memprof's but `error`.
pub mod profile;
pub mod stats;
pub mod units;
