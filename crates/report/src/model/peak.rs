//! The peak record: the highest `allocated_bytes.all.current` of the run (or of one targeted
//! function's calls) and the live bytes at that moment by the site that allocated them, summing
//! exactly to it. Part of the report schema (`peak:` at the top, and in each function).
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the peak record means, written into every report that has one.
pub const PEAK_SEMANTICS: &str = "The peak is the highest allocated_bytes.all.current of the run on the profiled device (the moment \
max_memory_allocated() is set, resets by the program aside), or, in a function's report, the \
highest during that function's calls. Its bytes are split by the site that allocated each block \
live at that moment (CUDA: the caching allocator's block sizes; CPU: storage bytes): the innermost \
Python frame outside torch, the standard library and memprof, with the line that led there as its \
context (the user's own innermost line when the site is a library's, else the site's caller). \
Allocations made by autograd's threads count at the line that ran the backward (loss.backward(), \
torch.autograd.grad). The sites, the other sites and unseen_bytes (allocated where memprof saw no \
allocation: before it started, or on a thread without its reporter) sum to allocated_bytes \
exactly. categories: what each block live at the peak was to the program, per site and summed in \
the peak's categories (other: what no rule named). parameters, buffers, gradients and \
optimizer_state: named by an optimizer's step, by a backward pass that left them live (a leaf's \
.grad), or by the models and optimizers in memory when the run ended; cuda_graph_pool: allocated \
while a CUDA graph was captured (or torch's CUDA-graph trees warmed up in their pool) and live \
then, or found in a pool at the end. The rest by how the block's life ended: activations, \
allocated outside a backward pass and freed by one (what autograd saved), or allocated inside an \
nn.Module call and held past its line (a forward's outputs: the logits); autograd_temporaries, \
allocated by a backward pass and not left as a gradient (gradients of activations in flight; also \
the gradient a backward starts from); temporaries, freed by the line that allocated it before \
another backward pass began (an op's or a line's intermediates, a call's workspace, an optimizer's \
scratch); inputs, allocated outside any module call and held past its line (the batch, targets, \
masks; also a loss computed outside a module); workspaces, still live at the end and held by no \
tensor the program could reach (cuBLAS's workspace, kept by C++). device: the device's memory at \
the peak from the driver's count down (CUDA: process_bytes = context_bytes + \
outside_allocator_bytes + reserved_bytes, and reserved_bytes = allocated_bytes + cached_bytes), or \
the host's resident peak against the tensors' bytes (CPU). cuda_graph_replays counts the CUDA \
graphs' replays, which allocate nothing.";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Peak {
    /// What the record means (the run's peak only; see `PEAK_SEMANTICS`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub semantics: String,
    /// allocated_bytes.all.current at its highest.
    pub allocated_bytes: i64,
    /// reserved_bytes.all.current at that moment (the allocator's cached and fragmented bytes
    /// besides; equal to allocated_bytes on the CPU).
    pub reserved_bytes: i64,
    /// The allocation that reached it.
    pub reached: Reached,
    /// The largest sites, largest first.
    pub sites: Vec<PeakSite>,
    /// The sites not listed, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_sites: Option<OtherSites>,
    /// Bytes the allocator counted whose allocation memprof did not see.
    pub unseen_bytes: i64,
    /// Bytes by category over every site, listed or not (see `PeakSite::categories`); `other`
    /// is what no rule named. Absent in reports of memprof versions before the categories.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub categories: BTreeMap<String, i64>,
    /// The functions holding the largest sites, as `-f` arguments for the next run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next_targets: Vec<String>,
    /// Whether `--modules` is worth adding next: libraries' code (a model's layers, mostly) holds
    /// most of the peak, and the run had no `--modules`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub next_modules: bool,
    /// The whole device at the peak, from the driver's count down (the run's peak only; absent
    /// where it could not be read, and in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceSplit>,
    /// CUDA graphs replayed during the run (the run's peak only): a replay allocates nothing,
    /// its graph's memory being its private pool's (cuda_graph_pool).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cuda_graph_replays: u64,
}

/// The device's memory at the peak, from what the driver counts down to what the allocator
/// handed out (CUDA), or the host's resident memory against the tensors' bytes (CPU).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeviceSplit {
    Cuda(CudaSplit),
    Cpu(HostSplit),
}

/// CUDA: `process_bytes` = `context_bytes` + `outside_allocator_bytes` + `reserved_bytes`, and
/// `reserved_bytes` = `allocated_bytes` + `cached_bytes`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CudaSplit {
    /// The process's device memory at the peak: the driver's count at the end of the run, less
    /// what the allocator's reservation changed between the peak and the end.
    pub process_bytes: i64,
    /// The driver's count when the run ended, as read.
    pub driver_bytes_at_end: i64,
    /// Where the driver's count comes from: `nvml_process` (this process's bytes, as nvidia-smi
    /// lists them) or `device_used` (the device's used bytes, every process's: NVML could not
    /// name this process's).
    pub driver_source: String,
    /// Device memory in use before the allocator's first block, less its first segment: the
    /// CUDA context (kernels, the runtime's own heap) and whatever came before torch's allocator.
    pub context_bytes: i64,
    /// Device memory the driver counts that is neither the context nor the allocator's
    /// reservation: cuBLAS/cuDNN/NCCL handles and workspaces of their own, kernels loaded later,
    /// other libraries' allocations (at the end of the run).
    pub outside_allocator_bytes: i64,
    /// The allocator's reservation at the peak (reserved_bytes.all.current then).
    pub reserved_bytes: i64,
    /// Handed out at the peak (allocated_bytes.all.peak): the categories split it.
    pub allocated_bytes: i64,
    /// Reserved but not handed out at the peak: cached free blocks, and free pieces of split
    /// segments that cannot be given back while the rest of their segment is in use.
    pub cached_bytes: i64,
    /// inactive_split_bytes.all.peak: the most the free pieces of split segments held at once
    /// during the run (the fragmentation; expandable_segments avoids most of it).
    pub inactive_split_peak_bytes: i64,
    /// The allocator's reservation when the run ended.
    pub reserved_bytes_at_end: i64,
}

/// CPU: the process's resident memory against the tensors' bytes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct HostSplit {
    /// The process's resident high-water mark (VmHWM) when the run ended.
    pub rss_peak_bytes: i64,
    /// The tensors' bytes at the peak (allocated_bytes.all.peak).
    pub tensor_bytes: i64,
    /// What the resident peak holds besides (the interpreter, libraries, the C allocator's
    /// caching, memory outside libtorch's allocator): rss_peak_bytes - tensor_bytes.
    pub other_bytes: i64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Reached {
    /// The site of the allocation that reached the peak (absent when a function's peak was at
    /// the start of a call, before it allocated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<Place>,
    /// The line it was reached from (the site's context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Place>,
    /// Whether a backward pass made that allocation.
    pub in_backward: bool,
    /// Whether a compiled graph made it (the site is where its FX node came from).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compiled: bool,
    /// Its number among the allocations on the device (1 = the first).
    pub allocation: u64,
    /// The how-many-th allocation of its site it was (the iteration, for a site that allocates
    /// once per step).
    pub site_allocation: u64,
    /// Seconds from the start of the run.
    pub seconds: f64,
}

/// A line of code: where, in which function, and its text.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    pub file: String,
    pub line: u32,
    pub function: String,
    pub source: String,
}

/// Where a site is: its line, and the line that led there (see the semantics). Flattened into
/// each record that names a site (`file`, `line`, `function`, `source`, `context`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SiteAt {
    #[serde(flatten)]
    pub place: Place,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Place>,
    /// The bytes were allocated by a compiled graph (torch.compile) and attributed to the line
    /// its FX node came from: the graph's buffers, not that line's own execution.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compiled: bool,
}

impl SiteAt {
    /// `gpt2_model.py:97 GPT.forward` (`... [compiled]` for a compiled graph's attribution):
    /// how tables and pictures name it.
    pub fn label(&self) -> String {
        if self.compiled {
            format!("{} [compiled]", self.place.label())
        } else {
            self.place.label()
        }
    }
}

impl Place {
    /// `train.py:31 train_step` (the function alone when the file is unknown).
    pub fn label(&self) -> String {
        if self.file.is_empty() {
            self.function.clone()
        } else {
            format!(
                "{}:{} {}",
                super::paths::file_name(&self.file),
                self.line,
                self.function
            )
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PeakSite {
    #[serde(flatten)]
    pub at: SiteAt,
    /// Live bytes at the peak.
    pub bytes: i64,
    /// Their share of the peak, in percent.
    pub share: f64,
    /// Live blocks (storages on the CPU).
    pub blocks: u64,
    /// Bytes by category (`CATEGORIES`), every part of a mixed site.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub categories: BTreeMap<String, i64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OtherSites {
    pub sites: u64,
    pub bytes: i64,
    pub blocks: u64,
}

/// The categories, in the order a report lists them when sizes tie: what the program keeps
/// (the model's state), what a step makes, and what no rule named.
pub const CATEGORIES: [&str; 11] = [
    "parameters",
    "buffers",
    "gradients",
    "optimizer_state",
    "activations",
    "autograd_temporaries",
    "temporaries",
    "inputs",
    "cuda_graph_pool",
    "workspaces",
    "other",
];

impl PeakSite {
    /// The category holding most of its bytes ("other" when none is known).
    pub fn main_category(&self) -> &str {
        self.categories
            .iter()
            .filter(|(_, &b)| b > 0)
            .max_by_key(|(_, &b)| b)
            .map(|(c, _)| c.as_str())
            .unwrap_or("other")
    }

    /// Whether its bytes are of more than one category.
    pub fn is_mixed(&self) -> bool {
        self.categories.values().filter(|&&b| b > 0).count() > 1
    }
}

/// `categories` largest first (ties in `CATEGORIES` order), the empty ones left out.
pub fn largest_first(categories: &BTreeMap<String, i64>) -> Vec<(&str, i64)> {
    let rank = |c: &str| {
        CATEGORIES
            .iter()
            .position(|&k| k == c)
            .unwrap_or(CATEGORIES.len())
    };
    let mut out: Vec<(&str, i64)> = categories
        .iter()
        .filter(|(_, &b)| b > 0)
        .map(|(c, &b)| (c.as_str(), b))
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(rank(a.0).cmp(&rank(b.0))));
    out
}

impl Peak {
    /// Σ of every part: equal to `allocated_bytes` in a consistent record.
    pub fn parts_sum(&self) -> i64 {
        self.sites.iter().map(|s| s.bytes).sum::<i64>()
            + self.other_sites.as_ref().map_or(0, |o| o.bytes)
            + self.unseen_bytes
    }
}
