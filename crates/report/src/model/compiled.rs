//! The lines of a targeted function that ran compiled (torch.compile): how much of the compiled
//! graphs' memory came from each line, forward and backward, and which lines' nodes left no
//! buffer of their own.
use serde::{Deserialize, Serialize};

/// The rules of a function's compiled lines, written into the report.
pub const COMPILED_SEMANTICS: &str = "Attributions of compiled graphs (torch.compile with \
inductor), not executions: the graph runs as generated code, and each buffer it allocates is \
counted at the source line of the FX node it was allocated for (torch's own map of the generated \
code's lines to the nodes' stack traces, the same for a fresh compile and a cache hit). \
allocated_bytes and allocations are summed over the run, forward and backward graphs together \
(backward_allocated_bytes: the part the backward graphs allocated, attributed to the forward line \
whose node they differentiate); peak_live_bytes is what the line's buffers held at the function's \
peak (the highest allocated bytes reached during its calls or by an allocation of its compiled \
buffers; the function's peak record says where). \
A line marked fused has FX nodes in a graph but no buffer of its own: its computation was fused into \
a kernel whose buffer another line holds, or writes in place. Lines of the function that ran eagerly \
(graph breaks, code outside the compiled region) are measured as usual, in the function's lines.";

/// A function's compiled lines.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CompiledLines {
    pub semantics: String,
    /// The lines with compiled buffers or nodes, in line order.
    pub lines: Vec<CompiledLine>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CompiledLine {
    pub line: u32,
    pub source: String,
    /// Buffers the compiled graphs allocated for the line's nodes, over the run.
    pub allocations: u64,
    pub allocated_bytes: i64,
    /// Of `allocated_bytes`, what backward graphs allocated.
    pub backward_allocated_bytes: i64,
    /// The line's buffers live at the function's peak.
    pub peak_live_bytes: i64,
    /// Nodes of the line are in a compiled graph, and none has a buffer of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fused: bool,
}
