//! The reports of a job's ranks merged (`schema: memprof.merged/1`): per function line and module
//! row, each number's max, median and min over the ranks, the rank holding the max, and the
//! imbalance; the ranks' peaks as a distribution with its outliers named; the hosts.
use super::profile::StatColumn;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MERGED_SCHEMA: &str = "memprof.merged/1";

/// What a merged number means, written into the merged report.
pub const MERGED_SEMANTICS: &str = "Each number of the ranks' reports, over the ranks where it \
was measured: max, median (of an even count, the lower middle value) and min, the rank that holds \
the max (the lowest rank on a tie), and imbalance = max - min. The peaks' distribution adds p90 \
(the value 90% of the ranks are at or below, nearest rank) and names as outliers the ranks with the \
largest and smallest peak and every rank far from the rest: more than 3.5 robust standard \
deviations (1.4826 x the median absolute deviation) and more than 1% of the median away from the \
median. Lines match by function (qualified name and file name) and line number; \
module rows by root, qualified name and phase. `ranks` counts the ranks where a line ran or a \
module was called, when that is not every rank.";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Merged {
    pub schema: String,
    pub metadata: MergedMetadata,
    pub functions: Vec<MergedFunction>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<MergedModule>,
    /// The ranks' peaks, when their reports have them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<MergedPeak>,
    pub warnings: Vec<String>,
}

/// The ranks' peaks: each rank's, and per site its live bytes at each rank's peak, max and min
/// over the ranks that listed it (sites match by file name, line, function and context).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedPeak {
    pub allocated_bytes: Spread,
    pub reserved_bytes: Spread,
    pub ranks: Vec<RankPeak>,
    /// Ranks whose reports have no peak record: the max, min and imbalance are over the others
    /// only, and the table says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks_without_peak: Vec<u32>,
    /// The ranks' allocated and reserved peaks as distributions.
    #[serde(default)]
    pub distribution: PeakDistribution,
    /// The ranks named: the largest peak, the smallest, and any far from the rest (largest
    /// first).
    #[serde(default)]
    pub outliers: Vec<Outlier>,
    /// Largest max first.
    pub sites: Vec<MergedPeakSite>,
}

/// The ranks' peaks, allocated and reserved.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct PeakDistribution {
    pub allocated_bytes: Quantiles,
    pub reserved_bytes: Quantiles,
}

/// One number over the ranks as a distribution.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quantiles {
    pub min: i64,
    pub min_rank: u32,
    pub median: i64,
    pub p90: i64,
    pub max: i64,
    pub max_rank: u32,
}

impl Quantiles {
    /// Over (rank, value) pairs; None when there are none. Ties go to the lowest rank.
    pub fn of(values: impl IntoIterator<Item = (u32, i64)>) -> Option<Quantiles> {
        let mut sorted: Vec<(i64, u32)> = values.into_iter().map(|(r, v)| (v, r)).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_unstable();
        let n = sorted.len();
        let (min, min_rank) = sorted[0];
        let max = sorted[n - 1].0;
        // The lowest rank among those holding the max.
        let max_rank = sorted[sorted.partition_point(|(v, _)| *v < max)].1;
        Some(Quantiles {
            min,
            min_rank,
            median: sorted[(n - 1) / 2].0,
            p90: sorted[nearest_rank(n, 90)].0,
            max,
            max_rank,
        })
    }
}

/// The index of the `percent`th percentile of `n` sorted values (the nearest-rank method).
fn nearest_rank(n: usize, percent: usize) -> usize {
    (n * percent).div_ceil(100).clamp(1, n) - 1
}

/// A rank the summary names.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Outlier {
    pub rank: u32,
    pub host: String,
    pub allocated_bytes: i64,
    /// allocated_bytes − the median.
    pub from_median_bytes: i64,
    /// `largest`, `smallest`, `far_above` or `far_below` (the largest or smallest when far from
    /// the rest too: `far_above`, `far_below`).
    pub kind: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RankPeak {
    pub rank: u32,
    pub allocated_bytes: i64,
    pub reserved_bytes: i64,
    /// `file:line function` of the allocation that reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached: Option<String>,
    pub in_backward: bool,
    /// The rank's peak by category (`Peak::categories`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub categories: std::collections::BTreeMap<String, i64>,
    /// The rank's whole device at its peak (`Peak::device`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<super::peak::DeviceSplit>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedPeakSite {
    #[serde(flatten)]
    pub at: super::peak::SiteAt,
    /// Ranks whose peak listed the site, when not every rank's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
    pub bytes: Spread,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedMetadata {
    pub memprof_version: String,
    pub torch_version: String,
    pub script: Option<String>,
    pub world_size: u32,
    /// The stats of every report, in column order.
    pub stats: Vec<StatColumn>,
    pub ranks: Vec<RankReport>,
    /// Ranks below world_size whose reports were not given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_ranks: Vec<u32>,
    /// The hosts, in the order of their lowest rank, with their ranks.
    #[serde(default)]
    pub hosts: Vec<HostRanks>,
    pub semantics: String,
}

/// A host and the ranks that ran there.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct HostRanks {
    pub host: String,
    pub ranks: Vec<u32>,
}

/// One rank's report.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RankReport {
    pub rank: u32,
    pub local_rank: u32,
    pub host: String,
    /// e.g. `cuda:1 (NVIDIA H200)`.
    pub device: String,
    pub file: String,
    /// `completed`, `exception`, ... as in the rank's report.
    pub outcome: String,
}

/// One number over the ranks.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    pub max: i64,
    /// Of an even count, the lower middle value (absent from reports merged before memprof
    /// 0.1's summary: read as 0).
    #[serde(default)]
    pub median: i64,
    pub min: i64,
    pub max_rank: u32,
    pub imbalance: i64,
}

impl Spread {
    /// Over (rank, value) pairs; None when there are none. Ties go to the lowest rank.
    pub fn of(values: impl IntoIterator<Item = (u32, i64)>) -> Option<Spread> {
        let q = Quantiles::of(values)?;
        Some(Spread {
            max: q.max,
            median: q.median,
            min: q.min,
            max_rank: q.max_rank,
            imbalance: q.max - q.min,
        })
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedFunction {
    pub qualname: String,
    pub file: String,
    pub first_line: u32,
    pub calls: Spread,
    pub peak_allocated_bytes: Option<Spread>,
    pub lines: Vec<MergedLine>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedLine {
    pub line: u32,
    pub source: String,
    /// Ranks where the line ran, when not every rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_bytes: Option<Spread>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<String, Spread>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub collectives: BTreeMap<String, Spread>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedModule {
    pub root: String,
    pub module: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub depth: u32,
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
    pub calls: Spread,
    pub delta_bytes: Spread,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_increase_bytes: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_bytes: Option<Spread>,
    pub parameter_bytes: Spread,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub collectives: BTreeMap<String, Spread>,
}

/// Ranks as runs: `0–3, 5, 9–1023`.
pub fn rank_list(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => ranks[i].to_string(),
            1 => format!("{}, {}", ranks[i], ranks[j]),
            _ => format!("{}–{}", ranks[i], ranks[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists_are_runs() {
        assert_eq!(
            rank_list(&[0, 1, 2, 3, 5, 7, 8, 10, 11, 12]),
            "0–3, 5, 7, 8, 10–12"
        );
        assert_eq!(rank_list(&[4]), "4");
        assert_eq!(rank_list(&[]), "");
    }

    #[test]
    fn a_spread_names_the_rank_of_the_max_and_the_imbalance() {
        let s = Spread::of([(0, 10), (1, 40), (2, 40), (3, 5)]).unwrap();
        assert_eq!(
            s,
            Spread {
                max: 40,
                median: 10,
                min: 5,
                max_rank: 1,
                imbalance: 35
            }
        );
        assert_eq!(Spread::of(std::iter::empty()), None);
        let one = Spread::of([(3, -7)]).unwrap();
        assert_eq!(
            (one.max, one.median, one.min, one.max_rank, one.imbalance),
            (-7, -7, -7, 3, 0)
        );
    }

    #[test]
    fn quantiles_take_the_nearest_rank_and_name_the_ranks_of_the_ends() {
        // Ranks 0..100 hold 100 - r: the max on rank 0, the min on rank 99.
        let q = Quantiles::of((0..100).map(|r| (r, 100 - r as i64))).unwrap();
        assert_eq!(
            (q.min, q.min_rank, q.median, q.p90, q.max, q.max_rank),
            (1, 99, 50, 90, 100, 0)
        );
        let q = Quantiles::of([(5, 7), (2, 7), (9, 3)]).unwrap();
        assert_eq!((q.max_rank, q.min_rank, q.median, q.p90), (2, 9, 7, 7));
        assert_eq!(nearest_rank(1, 90), 0);
        assert_eq!(nearest_rank(10, 90), 8);
        assert_eq!(nearest_rank(1024, 90), 921);
    }
}
