//! What the live view shows of a running program, once a second (`memprof run --live`,
//! `memprof live PID`): memory now and at its highest, memory over time, the sites holding the
//! most now, what grows, and the steps so far. Small by design: it crosses a socket each second.
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct LiveState {
    pub pid: u32,
    /// The script (or `-m module`) and the device, e.g. `cuda:0 (NVIDIA H100 80GB HBM3)`.
    pub script: String,
    pub device: String,
    /// Seconds since measuring began.
    pub seconds: f64,
    pub allocated_bytes: i64,
    pub reserved_bytes: i64,
    pub peak_allocated_bytes: i64,
    /// allocated_bytes.all.current over time: the highest of each of the timeline's latest
    /// points (oldest first).
    pub history: Vec<i64>,
    /// The sites holding the most live bytes now, the most first.
    pub top_sites: Vec<LiveSite>,
    /// The sites growing from step to step (as the report's growth record).
    pub growing: Vec<LiveGrowing>,
    /// `optimizer step`, or `call of train_step`; and how many have ended.
    pub step: Option<String>,
    pub steps: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LiveSite {
    /// `train.py:31 train_step`
    pub label: String,
    pub source: String,
    pub bytes: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LiveGrowing {
    pub label: String,
    pub source: String,
    pub bytes_per_step: i64,
    pub steps: u64,
    pub live_bytes: i64,
}
