//! `memprof fit`'s report: a trace replayed on a device of some size with some allocator
//! settings (analysis::allocator), against what the traced run measured.
use super::trace::{Measured, Simulated};
use serde::{Deserialize, Serialize};

pub const PREDICTION_SEMANTICS: &str = "The trace's allocations and frees replayed in order on \
memprof's model of PyTorch's CUDA caching allocator (torch 2.11, without CUDA graphs' private \
pools), with `memory_bytes` for the allocator to reserve and the given \
settings; the numbers are the allocator's own stats at the end of the replay, or where it ran out \
of memory. Allocations outside the caching allocator (the CUDA context, NCCL, cuBLAS's own \
workspace where it bypasses it) are not in the trace: leave them out of memory_bytes.";

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Prediction {
    pub semantics: String,
    pub trace: String,
    pub events: u64,
    pub memory_bytes: i64,
    pub settings: String,
    pub fits: bool,
    pub predicted: Measured,
    /// What the traced run measured (when the trace has it): a replay on its own device with its
    /// own settings equals it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_memory: Option<PredictedOom>,
    /// The batch size predicted for (--scale, --max-batch), and the traced ones it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traced_batches: Vec<u64>,
    /// --max-batch: the largest batch that fits (the prediction above is at it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u64>,
    /// Lines whose sizes a third trace puts off the fitted line (the prediction is less sure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_affine: Vec<String>,
    /// --scale/--max-batch: the allocations the traces did not have in common (matched by line
    /// and stream, in order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmatched: Option<UnmatchedAllocations>,
    /// With a third trace: the fit synthesized at its batch and replayed, against the third
    /// trace replayed itself (same memory, same settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<FitCheck>,
    /// A simulated run's trace (`memprof run --simulate-gpu`): the GPU, and where it stood in for
    /// the GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<Simulated>,
    /// For a simulated run: what was live at the allocated peak, by line and category, largest
    /// first (each allocation's block as the model rounds it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peak_live: Vec<LiveAt>,
}

/// What the alignment of the traces left without a partner.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnmatchedAllocations {
    /// The template's allocations (the larger batch's trace of the first two, whose events the
    /// prediction replays) the other has not, and their bytes in the template.
    pub first_allocations: u64,
    pub first_bytes: u64,
    /// Of those, the ones sized as the other trace has their line's like allocations (same
    /// line, stream and size in the template: a batch prefetched more or less); the rest keep
    /// the template's size.
    pub first_sized_alike: u64,
    /// The other trace's allocations the template has not: not in the synthesized trace.
    pub second_allocations: u64,
    pub second_bytes: u64,
}

/// The third trace's batch predicted from the first two, against the third replayed.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct FitCheck {
    pub batch: u64,
    pub predicted: Measured,
    pub traced: Measured,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PredictedOom {
    /// The index of the allocation event that failed (0-based), and where the program made it.
    pub event: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    pub requested_bytes: i64,
    /// The segment the allocator asked the device for.
    pub allocation_bytes: i64,
    /// allocated and reserved bytes then, after the cache was freed.
    pub allocated_bytes: i64,
    pub reserved_bytes: i64,
    /// What was live then, by the line that allocated it, largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<LiveAt>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LiveAt {
    /// `file.py:LINE`, or `unknown` for allocations without a line.
    pub at: String,
    pub bytes: i64,
    pub blocks: u64,
    /// What the allocations are (`activations`, ...), where the trace says (a simulated run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}
