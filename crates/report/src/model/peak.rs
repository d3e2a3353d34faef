//! The peak record: the highest `allocated_bytes.all.current` of the run (or of one targeted
//! function's calls) and the live bytes at that moment by the site that allocated them, summing
//! exactly to it. Part of the report schema (`peak:` at the top, and in each function).
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the peak record means, written into every report that has one.
pub const PEAK_SEMANTICS: &str = "The peak is the highest allocated_bytes.all.current of the run on \
the profiled device (the moment max_memory_allocated() is set, resets by the program aside), or, in \
a function's report, the highest during that function's calls. Its bytes are split by the site that \
allocated each block live at that moment (CUDA: the caching allocator's block sizes; CPU: storage \
bytes): the innermost Python frame outside torch, the standard library and memprof, with the line \
that led there as its context (the user's own innermost line when the site is a library's, else the \
site's caller). Allocations made by autograd's threads count at the line that ran the backward \
(loss.backward(), torch.autograd.grad). The sites, the other sites and unseen_bytes (allocated where \
memprof saw no allocation: before it started, or on a thread without its reporter) sum to \
allocated_bytes exactly. categories: bytes of the site's blocks still live when the run ended and \
found then as parameters, buffers, gradients or optimizer_state of the models and optimizers in \
memory, or as blocks of a CUDA graph's private pool (cuda_graph_pool: allocated while a graph was \
captured or while torch's CUDA-graph trees warmed up in their pool, and live then, or found in a pool \
when the run ended); the rest is other. cuda_graph_replays counts the CUDA graphs' replays, which \
allocate nothing.";

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
    /// CUDA graphs replayed during the run (the run's peak only): a replay allocates nothing,
    /// its graph's memory being its private pool's (cuda_graph_pool).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cuda_graph_replays: u64,
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
