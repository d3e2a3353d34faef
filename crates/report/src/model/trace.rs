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
    /// Written by `memprof run --simulate-gpu`: no GPU ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<Simulated>,
}

/// What a simulated run (`--simulate-gpu`) says of itself.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Simulated {
    /// The GPU it stood in for (`torch.cuda.get_device_name()`'s answer).
    pub gpu: String,
    /// `--simulate-ranks N`: the run was rank 0 of N, one such GPU each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
    /// Where the simulation is less sure, by line: a value read that a simulated tensor does not
    /// have (a placeholder was used), a size that depended on values, a compiled model run as
    /// the eager one.
    #[serde(default)]
    pub notes: Vec<SimulationNote>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct SimulationNote {
    pub at: String,
    pub what: String,
}

impl TraceEvent {
    /// One of the allocator's own segment events (not replayed: the model makes its own).
    pub fn is_segment_event(&self) -> bool {
        self.segment_alloc.is_some()
            || self.segment_free.is_some()
            || self.segment_map.is_some()
            || self.segment_unmap.is_some()
    }
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TraceDevice {
    pub name: String,
    /// The bytes the allocator may reserve (the device's memory less what is not PyTorch's, or
    /// `set_per_process_memory_fraction`'s share), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_memory: Option<i64>,
    /// The device's memory as the driver reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_memory: Option<i64>,
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
    /// The device's memory in use that the caching allocator had not reserved, at the end of
    /// the run (the driver's used bytes less `reserved_bytes.all.current`): the CUDA context,
    /// libraries' own allocations (NCCL, cuBLAS where it bypasses the allocator), other
    /// processes. Not in the model: what the allocator could reserve is the device's less this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_allocator_bytes: Option<i64>,
}

/// `{"alloc": ID, "size": BYTES, "stream": S, "at": "file.py:LINE"}` or `{"free": ID}`; on CUDA
/// also the allocator's segment events, `{"segment_alloc": BYTES, "stream": S}` (a cudaMalloc),
/// `{"segment_free": BYTES}`, and expandable segments' `{"segment_map": BYTES}` and
/// `{"segment_unmap": BYTES}`, where the run made them.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct TraceEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<u64>,
    /// The size the program requested (`sizes` says where it is the block's instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The block the allocator handed out, where it differs from `size` (rounded, or a
    /// remainder kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_alloc: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_free: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_map: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_unmap: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// Where the program allocated it (`file.py:LINE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// With `--modules`: the module whose forward ran it (`GPT.transformer.h.3.mlp`), innermost,
    /// on the allocating thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// What the allocation is to the program (`parameters`, `activations`, ...), where the
    /// trace knows it (a simulated run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}
