//! An allocation trace (`memprof fit`'s input): the device's allocations and frees in order,
//! with what the run itself measured, in JSON or YAML:
//!
//! ```json
//! {"memprof_trace": 1, "torch_version": "2.11.0+cu130",
//!  "device": {"name": "NVIDIA H100 80GB HBM3", "total_memory": 85045870592},
//!  "settings": "max_split_size_mb:128",
//!  "measured": {"reserved_bytes.all.peak": 7549747200, "num_alloc_retries": 0},
//!  "events": [{"alloc": 1, "size": 1048576, "stream": 0, "at": "train.py:29"}, {"free": 1}]}
//! ```
use serde::{Deserialize, Serialize};

/// The format version this memprof reads and writes.
pub const TRACE_VERSION: u32 = 1;

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Trace {
    pub memprof_trace: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<TraceDevice>,
    /// The allocator settings of the run (`PYTORCH_CUDA_ALLOC_CONF`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// What the run itself read at its end, to compare a replay on its own device with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    pub events: Vec<TraceEvent>,
    /// The recording stopped at its limit: the trace is not whole (and cannot be replayed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// What the sizes are: `requested` (the program's: CPU tensors' bytes, the CUDA allocator's
    /// own trace entries), or `block` (the allocator's blocks, as its reports to the profiler
    /// give them, where its trace entries could not be read: rounded, a kept remainder included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TraceDevice {
    pub name: String,
    /// The bytes the allocator may reserve (the device's memory less what is not PyTorch's, or
    /// `set_per_process_memory_fraction`'s share), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_memory: Option<i64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Measured {
    #[serde(
        rename = "reserved_bytes.all.peak",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub reserved_bytes_peak: Option<i64>,
    #[serde(
        rename = "allocated_bytes.all.peak",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub allocated_bytes_peak: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_alloc_retries: Option<i64>,
    #[serde(
        rename = "segment.all.peak",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub segment_peak: Option<i64>,
}

/// `{"alloc": ID, "size": BYTES, "stream": S, "at": "file.py:LINE"}` or `{"free": ID}`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct TraceEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// Where the program allocated it (`file.py:LINE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}
