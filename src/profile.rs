//! The report model: what a run measured, in bytes, with the metadata needed to read it. This is
//! the documented YAML/JSON schema (`schema: memprof.profile/1`); renderers only read it.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema identifier written in every saved report.
pub const SCHEMA: &str = "memprof.profile/1";

/// The measurement rules, written into every report so a saved file explains its own numbers.
pub const SEMANTICS: &str = "One execution of a line runs from its start to the start of the next \
line of the same frame, or to the frame's yield or exception exit, and includes everything it calls \
(other threads' allocations on the device land in it too); a returning call's last line runs until \
its caller resumes (the caller's next line or return, or its next call of a target), so it includes \
the release of the frame's locals. For one execution: a *.current \
stat is its value at the end; a *.peak stat is the highest value reached during the execution \
(exact: from the allocator's own allocation reports, or from peak resets where the header says so); \
*.allocated and *.freed and num_* counters are the amounts during the execution; delta_bytes is the \
net change of allocated_bytes.all.current. Over many hits: hits counts executions (a generator \
resuming a line continues that execution), peaks and currents take the maximum, amounts and \
delta_bytes take the sum. raised counts executions that an exception left.";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Profile {
    pub schema: String,
    pub metadata: Metadata,
    pub functions: Vec<FunctionProfile>,
    /// Targets that matched nothing or never ran, and other things the user should know.
    pub warnings: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Metadata {
    pub memprof_version: String,
    pub torch_version: String,
    pub python_version: String,
    pub device: DeviceInfo,
    /// memprof's own command line, as given.
    pub command_line: Vec<String>,
    /// The stats shown, in column order.
    pub stats: Vec<StatColumn>,
    /// Set when device-wide peak stats were reset at every traced line (a chosen peak stat had no
    /// other exact source): the program's own `max_memory_*` readings were affected.
    pub peak_resets: Option<String>,
    pub semantics: String,
    pub outcome: Outcome,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    /// `cuda` or `cpu`.
    #[serde(rename = "type")]
    pub kind: String,
    pub index: Option<i32>,
    /// e.g. `NVIDIA H100 80GB HBM3`, or `cpu`.
    pub name: String,
}

impl DeviceInfo {
    /// `cuda:0` or `cpu`.
    pub fn label(&self) -> String {
        match self.index {
            Some(i) => format!("{}:{i}", self.kind),
            None => self.kind.clone(),
        }
    }

    /// `cuda:0 (NVIDIA H100 80GB HBM3)`, or `cpu`.
    pub fn describe(&self) -> String {
        if self.name.is_empty() || self.name == self.kind {
            self.label()
        } else {
            format!("{} ({})", self.label(), self.name)
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct StatColumn {
    pub key: String,
    pub is_bytes: bool,
    /// `max` or `sum`: how hits combine.
    pub aggregation: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `completed`, `exception`, `interrupted` or `terminated`.
    pub status: String,
    pub exit_code: i32,
    /// `TypeName: message` of an uncaught exception.
    pub exception: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct FunctionProfile {
    pub qualname: String,
    pub file: String,
    pub first_line: u32,
    /// How it was chosen: the `-f` target(s) or `@profile`.
    pub targets: Vec<String>,
    /// Number of calls (a generator's resumptions are not new calls).
    pub calls: u64,
    /// Highest allocated_bytes.all.peak of any line (the function's own peak while it ran).
    pub peak_allocated_bytes: Option<i64>,
    pub lines: Vec<LineProfile>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LineProfile {
    pub line: u32,
    pub source: String,
    pub hits: u64,
    /// Executions that an exception left (the line raised or propagated it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub raised: u64,
    /// Net change of allocated bytes, summed over hits; absent for lines that never ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_bytes: Option<i64>,
    /// The chosen stats, by key; empty for lines that never ran.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<String, i64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
