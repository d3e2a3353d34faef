//! The program's child processes that memprof followed (`multiprocessing`'s fork and spawn
//! children: DataLoader workers, `torch.multiprocessing.spawn`): what a child's own report says
//! of where it came from, and what the parent's report says of each child.
use serde::{Deserialize, Serialize};

/// In a child's report: the process it is a child of, and how it was started.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ChildOf {
    /// The pid of the process memprof ran (the program's main process).
    pub parent: u32,
    /// `fork` (a copy of the parent: DataLoader's workers on Linux) or `spawn` (a fresh
    /// interpreter: `torch.multiprocessing.spawn`, a `spawn` context).
    pub start: String,
}

/// In the parent's report: one child process and what it measured. Its targeted functions'
/// lines are among the report's functions, marked with the child (`FunctionProfile::process`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ChildProcess {
    pub pid: u32,
    /// `fork` or `spawn`.
    pub start: String,
    /// `completed`, `exception`, `os_exit`... as the child's own report says; `not followed`
    /// when memprof could not measure in it (`note` says why).
    pub outcome: String,
    /// The child's peak: allocated_bytes.all.current at its highest in the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<i64>,
    /// Where the child's peak was reached (`file:line function`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_reached: Option<String>,
    /// The targeted functions that ran in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    /// The child's own report, kept beside the parent's (`-o`): `memprof show` reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ChildProcess {
    /// `child 4242 (spawn)`, as the report names the process a function ran in.
    pub fn label(pid: u32, start: &str) -> String {
        format!("child process {pid} ({start})")
    }
}
