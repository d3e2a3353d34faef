//! The growth record (`growth:`): the sites whose live bytes rose at every boundary of the run's
//! repeated work (optimizer steps, or a targeted function's calls) for the latest steps, each
//! with its rise per step, the steps it has grown for, the bytes gained and what they are.
use super::peak::SiteAt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the record means, written into every report that has one.
pub const GROWTH_SEMANTICS: &str = "Sites whose live bytes keep growing from one step to the \
next. A step ends at each optimizer step (any torch.optim optimizer's step()), or, in a run \
without optimizer steps, at the end of each call of a targeted function (-f). At each step's end \
every site's live bytes (the blocks it allocated and not yet freed; CUDA: the caching \
allocator's block sizes) are compared with the previous step's end; the first step's end is the \
baseline, so what the first step makes once (optimizer state, cuBLAS's workspace) is never \
growth. A site grows when its live bytes rose at each of the latest steps, at least min_steps of \
them: steps counts them, grown_bytes is what it gained over them, bytes_per_step is grown_bytes / \
steps (exact when least_bytes equals most_bytes: the same rise each step), live_bytes what it holds \
now, categories the live bytes by what they are now.";

/// Steps in a row a site must have grown to be reported.
pub const MIN_GROWING_STEPS: u64 = 3;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Growth {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub semantics: String,
    /// `optimizer step`, or `call of train_step`.
    pub step: String,
    /// Steps ended so far (the first is the baseline).
    pub steps: u64,
    pub min_steps: u64,
    /// The growing sites, the most bytes gained first (empty: nothing grows).
    pub sites: Vec<GrowingSite>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GrowingSite {
    #[serde(flatten)]
    pub at: SiteAt,
    pub bytes_per_step: i64,
    /// The steps in a row, up to the latest, at which it grew.
    pub steps: u64,
    /// The step after which it began to grow (1: from the baseline on).
    pub since_step: u64,
    pub grown_bytes: i64,
    /// The smallest and largest rise of one step.
    pub least_bytes: i64,
    pub most_bytes: i64,
    pub live_bytes: i64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub categories: BTreeMap<String, i64>,
}
