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
its caller moves on (the caller's next call, line, return or yield), so it includes the release of \
the frame's locals and not the rest of the caller's statement. For one execution: a *.current \
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
    /// `--modules`: every torch.nn.Module call, forward and backward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<ModulesProfile>,
    /// `--tensors`: the live tensors at the end of targeted calls and where exceptions left them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensors: Option<Vec<Inventory>>,
    /// `--max`: each budget and the lines that exceeded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<BudgetResult>>,
    /// Out-of-memory errors raised during the run (always recorded; absent when none was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom: Option<OomReport>,
    /// `--history`: the allocation history file written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryInfo>,
    /// The run's peak on the profiled device and the sites that made it (absent when nothing was
    /// allocated there, and in reports saved before memprof 0.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<super::peak::Peak>,
    /// The run's memory over time (absent where nothing was allocated on the device, and in
    /// reports of memprof versions before the timeline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<super::timeline::Timeline>,
    /// The sites that keep growing from step to step (absent in a run of fewer than two steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth: Option<super::growth::Growth>,
    /// The program's child processes that memprof followed (fork and spawn children of
    /// `multiprocessing`), each with what it measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<super::children::ChildProcess>,
    /// Targets that matched nothing or never ran, and other things the user should know.
    pub warnings: Vec<String>,
}

/// What `--history` wrote.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct HistoryInfo {
    pub file: String,
    /// Trace entries in the file.
    pub events: u64,
    pub max_entries: u64,
    /// Older events the ring overwrote (CPU); None where torch does not say (CUDA).
    #[serde(default)]
    pub dropped: Option<u64>,
    /// Where the events come from.
    pub source: String,
}

/// One `--max` budget, checked.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct BudgetResult {
    /// As given, e.g. `train_step:allocated_bytes.all.peak=20GiB`.
    pub spec: String,
    /// The function it applies to (None: every targeted function).
    pub function: Option<String>,
    /// A stat key, or `delta`.
    pub key: String,
    pub limit: i64,
    /// The measured lines it was checked against; 0 means it checked nothing (its function was
    /// not measured, or no target ran), which fails like an exceeded budget. (Absent from reports
    /// of memprof versions that did not count them.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_checked: Option<u64>,
    /// The lines whose value was above the limit (empty with lines checked: the budget held).
    pub exceeded: Vec<Exceeded>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Exceeded {
    pub function: String,
    pub line: u32,
    pub source: String,
    pub value: i64,
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
    /// Which process of a distributed job wrote this report (rank 0 of 1 otherwise).
    #[serde(default)]
    pub process: ProcessInfo,
    /// The script as given (or `-m module`), so reports of one job can be told from another's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// `--warmup`/`--calls`: which calls of each function were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// `--collectives`: what the collective bytes are and what they cannot include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collectives: Option<String>,
    /// Interpreter events that reached memprof's line hook (trace-function calls on 3.11,
    /// sys.monitoring callbacks on 3.12+): what the hook cost, in events. Untargeted code adds
    /// none.
    #[serde(default)]
    pub hook_events: u64,
}

/// The process that wrote a report.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ProcessInfo {
    /// `RANK` (0 when not distributed).
    pub rank: u32,
    /// `LOCAL_RANK`.
    pub local_rank: u32,
    /// `WORLD_SIZE` (1 when not distributed).
    pub world_size: u32,
    pub host: String,
    pub pid: u32,
    /// In a child process's report (a DataLoader worker, a spawned process): its parent and
    /// how it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<super::children::ChildOf>,
}

impl ProcessInfo {
    /// `rank 1 of 2` in a multi-rank run.
    pub fn label(&self) -> Option<String> {
        (self.world_size > 1).then(|| format!("rank {} of {}", self.rank, self.world_size))
    }
}

impl Default for ProcessInfo {
    fn default() -> Self {
        ProcessInfo {
            rank: 0,
            local_rank: 0,
            world_size: 1,
            host: String::new(),
            pid: 0,
            child: None,
        }
    }
}

/// `--warmup N --calls M`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Schedule {
    pub warmup: u64,
    pub calls: Option<u64>,
    /// Whether every target had its calls and memprof stopped its hooks before the end.
    pub stopped_early: bool,
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
    /// Number of calls (a generator's resumptions are not new calls), until memprof stopped.
    pub calls: u64,
    /// With `--warmup`/`--calls`: the first and last call measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_calls: Option<[u64; 2]>,
    /// Highest allocated_bytes.all.peak of any line (the function's own peak while it ran).
    pub peak_allocated_bytes: Option<i64>,
    pub lines: Vec<LineProfile>,
    /// Where the function's own peak (the highest allocated bytes during its calls) came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<super::peak::Peak>,
    /// Its lines' share of compiled graphs' memory, where it ran compiled (torch.compile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled: Option<super::compiled::CompiledLines>,
    /// The process it ran in, when not the report's own: `child process 4242 (spawn)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
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
    /// `--collectives`: bytes of the collectives issued during the line, by kind (summed over
    /// hits; kinds with none are left out).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub collectives: BTreeMap<String, i64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What `--collectives` counts, written into the report.
pub const COLLECTIVES_SEMANTICS: &str = "Bytes of the torch.distributed collectives that started \
during the line or module call (on any thread: the program's, DDP's reducer, FSDP's hooks), summed \
over hits, by kind, exact from the tensors' sizes, seen where libtorch dispatches its c10d ops. For \
each collective the full buffer counts: what is reduced (all_reduce, broadcast, reduce), the gathered \
output (all_gather: world size x the shard), the input that is reduced and scattered \
(reduce_scatter), what this rank sends (all_to_all, send, gather) or receives (recv, scatter). Not \
included: buffers the backend allocates itself (NCCL's, invisible to PyTorch's allocator), and \
collectives issued inside CUDA graphs.";

/// The rules of the module report, written into it.
pub const MODULE_SEMANTICS: &str = "One row per module (its qualified name in the root model) and \
phase. A forward call runs from the module's forward pre-hook to its forward hook; its backward runs \
from when the gradients of its outputs are ready to when those of its inputs are (or to the end of \
the backward pass when no input needs a gradient). delta_bytes is the net change of \
allocated_bytes.all.current, summed over calls; peak_bytes is the highest allocated_bytes.all.peak \
during any call and peak_increase_bytes the largest rise above a call's starting allocated bytes; \
saved_bytes is the bytes of the storages that autograd saved for backward during the call (through a \
saved-tensors hook), not counting parameters and buffers of the model (nor any nn.Parameter or \
view of one, such as FSDP2's gathered parameters) or storages already saved earlier in the same \
forward pass, summed over calls. A module's numbers include its submodules'. \
parameter_bytes is the module's parameters, submodules included, on the profiled device, as the module \
holds them when the run ends (at its first call if it is gone by then); a sharded DTensor parameter \
(FSDP2's fully_shard) counts by its local shard, and unsharded_parameter_bytes gives the full size.";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ModulesProfile {
    pub semantics: String,
    /// Rows deeper than this were left out (`--depth`).
    pub depth: Option<u32>,
    /// Per module and phase, in the order of their first call (forward rows before backward).
    pub modules: Vec<ModuleEntry>,
    /// Every call in the order it started, for plots (capped; `timeline_dropped` counts the rest).
    pub timeline: Vec<ModuleEvent>,
    #[serde(default)]
    pub timeline_dropped: u64,
    /// `--suggest-checkpoints`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<CheckpointPlan>,
    /// The submodules of torch.compile'd models, per module and phase, as their compiled graphs'
    /// FX nodes name them ([`COMPILED_MODULE_SEMANTICS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compiled_modules: Vec<CompiledModuleEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled_semantics: Option<String>,
}

/// The rules of the compiled modules' rows, written into a report that has them.
pub const COMPILED_MODULE_SEMANTICS: &str =
    "A torch.compile'd model runs as generated code, so its \
submodules have no calls of their own: each row is an attribution of the compiled graphs' buffers \
to the module of the FX nodes they were allocated for (inductor's source nodes of each kernel, \
nn_module_stack in the nodes dynamo traced; a kernel with no node of its own module, such as a \
weight gradient, goes to the module of the kernels around it, or the module holding both), not \
an execution. calls counts the runs of the generated code of the module's forward (or backward) \
graph (a CUDA-graph replay runs none of it, and allocates nothing); allocated_bytes is what those graphs' lines allocated for the module, \
submodules included, over the run; saved_bytes is the bytes of the storages AOTAutograd saved \
for backward (the forward graph's results it keeps for the backward graph) by the module whose \
node produced them (a graph input by the module that first uses it; parameters not counted), \
summed over calls; pool_bytes, where CUDA graphs ran, is what of allocated_bytes went to their \
private pools (allocated while a graph was captured or a CUDA-graph tree warmed up in its pool). \
Fused nodes of several modules belong to the innermost module holding them all.";

/// One module of a compiled model and phase ([`COMPILED_MODULE_SEMANTICS`]); its root is the
/// compiled model's class (`GPT`), or the name the compiled function gives it, and its calls
/// are its graph's runs.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CompiledModuleEntry {
    #[serde(flatten)]
    pub row: ModuleRow,
    pub allocations: u64,
    pub allocated_bytes: i64,
    /// Forward rows only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_bytes: Option<i64>,
    /// Of `allocated_bytes`, what went to CUDA graphs' private pools (allocated while a graph
    /// was captured or a CUDA-graph tree warmed up in its pool); only when some did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_bytes: Option<i64>,
}

/// What names a row of the module tables, and its calls.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ModuleRow {
    /// The root module's class name (`ResNet`; `ResNet#2` for a second root of that class).
    pub root: String,
    /// Qualified name in the root (`layer3.2.conv1`); empty for the root itself.
    pub module: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub depth: u32,
    /// `forward` or `backward`.
    pub phase: String,
    pub calls: u64,
}

/// Both module tables' rows read as their `ModuleRow` (`entry.root`, `entry.calls`).
macro_rules! module_row_deref {
    ($($entry:ty),*) => {$(
        impl std::ops::Deref for $entry {
            type Target = ModuleRow;
            fn deref(&self) -> &ModuleRow {
                &self.row
            }
        }
        impl std::ops::DerefMut for $entry {
            fn deref_mut(&mut self) -> &mut ModuleRow {
                &mut self.row
            }
        }
    )*};
}
module_row_deref!(ModuleEntry, CompiledModuleEntry);

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ModuleEntry {
    #[serde(flatten)]
    pub row: ModuleRow,
    pub delta_bytes: i64,
    pub peak_bytes: Option<i64>,
    pub peak_increase_bytes: Option<i64>,
    /// Forward rows only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_bytes: Option<i64>,
    /// Parameters held on this device (for sharded DTensor parameters, the local shards).
    pub parameter_bytes: i64,
    /// When some parameters are sharded (FSDP2, DTensor): their full size on all ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsharded_parameter_bytes: Option<i64>,
    /// `--collectives`: bytes of the collectives issued during the calls, by kind, summed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub collectives: BTreeMap<String, i64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ModuleEvent {
    pub root: String,
    pub module: String,
    pub phase: String,
    /// Absent for a call that never ended (an exception or the end of the program cut it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_bytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_bytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_bytes: Option<i64>,
}

/// Where to put activation checkpoints: the split points that minimise the largest segment of
/// saved activations (FairScale's algorithm, on measured bytes), with estimates.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CheckpointPlan {
    pub root: String,
    /// The modules split between, in forward order: the leaves, or the modules at `--depth`.
    pub candidates: u32,
    pub requested: u32,
    /// Segments in forward order; checkpoint each with torch.utils.checkpoint.
    pub segments: Vec<Segment>,
    /// Bytes saved for backward in the planned forward pass (measured).
    pub activation_bytes: i64,
    /// Estimate with every segment checkpointed: the most, over segments k, of k's saved bytes
    /// plus the inputs kept at the starts of segments 2..=k (backward recomputes the segments
    /// last to first, freeing later inputs), plus what was saved outside the candidates.
    pub estimated_activation_bytes: i64,
    /// Saved bytes that no candidate accounts for (included in both numbers).
    pub outside_candidates_bytes: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Segment {
    pub first: String,
    pub last: String,
    pub modules: u32,
    pub saved_bytes: i64,
    /// Bytes of the first module's tensor inputs (kept when the segment is checkpointed).
    pub input_bytes: i64,
}

/// The live tensors on the device at one moment.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Inventory {
    /// e.g. `end of train_step (call 3)`.
    pub when: String,
    pub function: String,
    pub call: u64,
    pub raised: bool,
    /// allocated_bytes.all.current at that moment.
    pub allocated_bytes: i64,
    /// Bytes of the distinct storages of the tensors Python can reach.
    pub tensor_bytes: i64,
    /// allocated_bytes - tensor_bytes: memory no Python tensor holds (saved for backward, held by
    /// C++ such as cuBLAS/cuDNN workspaces, allocator rounding).
    pub gap_bytes: i64,
    pub categories: Vec<CategoryTotal>,
    pub storages: u64,
    /// Storages beyond the largest listed ones.
    pub unlisted_storages: u64,
    /// Objects that failed while inspected (vanished, or raised).
    pub skipped_objects: u64,
    /// Whether this inventory walked all the program's objects; false: it named the storages
    /// from the models, optimizers and frames the latest walk found, and carried that walk's
    /// findings for the blocks the allocator says are unchanged since. Absent in reports from
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walked: Option<bool>,
    /// The largest storages, largest first.
    pub tensors: Vec<InventoryTensor>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CategoryTotal {
    /// parameters, buffers, gradients, optimizer_state or other.
    pub category: String,
    pub bytes: i64,
    pub storages: u64,
    /// Parameters (and their gradients) sharded as DTensors: their full size on all ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsharded_bytes: Option<i64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct InventoryTensor {
    /// Names from the model, the optimizer or a targeted frame's variable; several for tied
    /// storages; absent when none is known.
    pub name: Option<String>,
    pub category: String,
    /// The storage's bytes.
    pub bytes: i64,
    /// Of the first tensor seen on the storage.
    pub shape: Vec<i64>,
    pub dtype: String,
    /// Tensors sharing the storage (views), the program's and autograd's (c10's use count of
    /// the storage, where torch exposes it; else the Python tensors a walk found); of all of
    /// them for a row of several storages.
    pub tensors: u64,
    /// Storages in this row: alike ones (the same category, shape, dtype and creation, unnamed or
    /// items of one container, `cache[…]`) are one row, `bytes` their sum.
    #[serde(default = "one_storage", skip_serializing_if = "is_one_storage")]
    pub storages: u64,
    /// `file:line (function)` of the targeted line that allocated it, for tensors that are not
    /// model state, gradients or optimizer state, when a targeted line did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

fn one_storage() -> u64 {
    1
}

fn is_one_storage(n: &u64) -> bool {
    *n == 1
}

/// What memprof recorded about the run's out-of-memory errors.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OomReport {
    pub semantics: String,
    /// OOMs raised during the run: every one the CUDA caching allocator raised, and one that
    /// ended the program without the allocator having raised it.
    pub count: u64,
    /// Of those, the ones the program caught (it went on).
    pub caught: u64,
    /// The first few, and the latest (the one that ended the run, if one did).
    pub events: Vec<OomEvent>,
    /// Seconds the live-tensor scans took in all.
    pub scan_seconds: f64,
    /// What to do, ranked by the bytes each would save (measured or estimated).
    pub suggestions: Vec<OomSuggestion>,
}

/// One out-of-memory error, recorded when the allocator raised it (`source: allocator`) or,
/// for one that reached the top without it, from the exception (`source: exception`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OomEvent {
    /// 1 for the run's first OOM.
    pub index: u64,
    /// `allocator` (numbers exact, read when it was raised) or `exception` (numbers parsed from
    /// torch's message, rounded as it prints them).
    pub source: String,
    /// Whether the program caught it and went on.
    pub caught: bool,
    /// The first line of torch's message, for an OOM that ended the program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The CUDA device that ran out (absent when unknown).
    #[serde(default)]
    pub device: Option<i32>,
    /// What the failed allocation asked for (rounded up as the allocator rounds requests).
    #[serde(default)]
    pub requested_bytes: Option<i64>,
    /// The device's capacity.
    #[serde(default)]
    pub device_total_bytes: Option<i64>,
    /// The cap set by torch.cuda.set_per_process_memory_fraction, when one was (on reserved bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cap_bytes: Option<i64>,
    /// Free on the device when the allocator gave up (after releasing its cached blocks).
    #[serde(default)]
    pub device_free_bytes: Option<i64>,
    /// allocated_bytes.all.current.
    #[serde(default)]
    pub allocated_bytes: Option<i64>,
    /// reserved_bytes.all.current.
    #[serde(default)]
    pub reserved_bytes: Option<i64>,
    /// active_bytes.all.current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_bytes: Option<i64>,
    /// inactive_split_bytes.all.current: free pieces of split blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inactive_split_bytes: Option<i64>,
    /// reserved − allocated: cached by PyTorch but not in use.
    #[serde(default)]
    pub fragmentation_bytes: Option<i64>,
    /// The largest free block in PyTorch's cache on that device.
    #[serde(default)]
    pub largest_free_block_bytes: Option<i64>,
    /// Whether PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF) turned expandable segments on.
    #[serde(default)]
    pub expandable_segments: bool,
    /// `program`: the thread that called the allocating op; `autograd`: one of autograd's threads
    /// (backward), whose Python stack is that of the thread waiting in backward().
    pub thread: String,
    /// The innermost frame of the user's code (outside torch, the standard library and installed
    /// packages): the line the OOM came from.
    pub line: Option<OomFrame>,
    /// The Python stack, innermost first.
    pub stack: Vec<OomFrame>,
    /// With --modules: the module calls running, outermost first.
    #[serde(default)]
    pub modules_active: Vec<String>,
    /// The live tensors on that device when it was raised.
    #[serde(default)]
    pub tensors: Option<Inventory>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OomFrame {
    pub file: String,
    pub line: u32,
    pub function: String,
    pub source: String,
    /// The user's code (not torch, the standard library or an installed package).
    pub user: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OomSuggestion {
    /// `expandable_segments`, `activation_checkpointing`, `free_gradients`, `smaller_batch`.
    pub kind: String,
    pub text: String,
    /// What it would save, when it can be told from the measured numbers.
    pub saving_bytes: Option<i64>,
}

pub const OOM_SEMANTICS: &str = "Recorded when the CUDA caching allocator raised \
torch.OutOfMemoryError (its numbers exact, read at that moment, while the failing frames and \
their tensors were alive), or, for an OutOfMemoryError that ended the program without the \
allocator raising it, from the exception's traceback and message. `line` is the innermost frame \
outside torch, the standard library and installed packages. Suggestions are ranked by the bytes \
each would save.";

/// The kinds of collectives, in the shim's order (`--collectives`' columns).
pub const COLLECTIVE_KINDS: [&str; 8] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "all_to_all",
    "send",
    "recv",
    "other",
];

/// The collective kinds any of `maps` has (by key), once each, in `COLLECTIVE_KINDS`' order: the
/// collective columns of a table, and the kinds a merged line keeps.
pub fn collective_kinds_in<'a, V: 'a>(
    maps: impl Iterator<Item = &'a BTreeMap<String, V>>,
) -> Vec<String> {
    let order = |kind: &String| {
        COLLECTIVE_KINDS
            .iter()
            .position(|k| k == kind)
            .unwrap_or(usize::MAX)
    };
    let mut kinds: Vec<String> = maps.flat_map(|m| m.keys().cloned()).collect();
    kinds.sort_by_key(order);
    kinds.dedup();
    kinds
}

/// The file name without its directories (where every report path is shown short).
pub use super::paths::file_name;

/// How a module row is named: its qualified name in the root model, or `Net (root)` for the root.
pub fn module_label(root: &str, module: &str) -> String {
    if module.is_empty() {
        format!("{root} (root)")
    } else {
        module.to_string()
    }
}

/// The key of a line's Δ in budgets and diffs.
pub const DELTA: &str = "delta";
/// A line's Δ per hit (its Δ over all calls, divided by its hits).
pub const DELTA_PER_CALL: &str = "delta_per_call";

/// Whether a key is one of the line's Δ (bytes, from the line itself), not a stat.
pub fn is_delta(key: &str) -> bool {
    key == DELTA || key == DELTA_PER_CALL
}

impl LineProfile {
    /// The line's value of `key`: its Δ (`delta`), its Δ per hit (`delta_per_call`), or a stat.
    pub fn value(&self, key: &str) -> Option<i64> {
        match key {
            DELTA => self.delta_bytes,
            DELTA_PER_CALL => self
                .delta_bytes
                .filter(|_| self.hits > 0)
                .map(|d| d / self.hits as i64),
            key => self.stats.get(key).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(hits: u64, delta: Option<i64>) -> LineProfile {
        LineProfile {
            line: 7,
            source: "x = f()".into(),
            hits,
            raised: 0,
            delta_bytes: delta,
            stats: BTreeMap::from([("allocated_bytes.all.peak".to_string(), 4096)]),
            collectives: BTreeMap::new(),
        }
    }

    #[test]
    fn a_lines_value_by_key_is_its_delta_its_delta_per_hit_or_a_stat() {
        let l = line(4, Some(-1000));
        assert_eq!(l.value(DELTA), Some(-1000));
        assert_eq!(l.value(DELTA_PER_CALL), Some(-250));
        assert_eq!(l.value("allocated_bytes.all.peak"), Some(4096));
        assert_eq!(l.value("reserved_bytes.all.peak"), None);
        assert_eq!(line(0, Some(0)).value(DELTA_PER_CALL), None, "never ran");
        assert!(is_delta(DELTA) && is_delta(DELTA_PER_CALL) && !is_delta("delta_bytes"));
    }

    #[test]
    fn names_as_every_table_writes_them() {
        assert_eq!(module_label("Net", ""), "Net (root)");
        assert_eq!(module_label("Net", "layer1.0"), "layer1.0");
        assert_eq!(file_name("/long/path/train.py"), "train.py");
        assert_eq!(file_name("train.py"), "train.py");
        let a = BTreeMap::from([("send".to_string(), 1), ("all_reduce".to_string(), 2)]);
        let b = BTreeMap::from([("other".to_string(), 3), ("send".to_string(), 4)]);
        assert_eq!(
            collective_kinds_in([&a, &b].into_iter()),
            ["all_reduce", "send", "other"],
            "once each, in the shim's order"
        );
        let p = ProcessInfo {
            rank: 1,
            world_size: 2,
            ..ProcessInfo::default()
        };
        assert_eq!(p.label().as_deref(), Some("rank 1 of 2"));
        assert_eq!(ProcessInfo::default().label(), None);
    }
}
