//! The reports of a job's ranks merged (`schema: memprof.merged/1`): per function line and module
//! row, each number's max and min over the ranks, the rank holding the max, and the imbalance.
use super::profile::StatColumn;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MERGED_SCHEMA: &str = "memprof.merged/1";

/// What a merged number means, written into the merged report.
pub const MERGED_SEMANTICS: &str = "Each number of the ranks' reports, over the ranks where it \
was measured: max and min, the rank that holds the max (the lowest rank on a tie), and \
imbalance = max - min. Lines match by function (qualified name and file name) and line number; \
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
    /// Largest max first.
    pub sites: Vec<MergedPeakSite>,
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
    pub semantics: String,
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
    pub min: i64,
    pub max_rank: u32,
    pub imbalance: i64,
}

impl Spread {
    /// Over (rank, value) pairs, ranks ascending; None when there are none.
    pub fn of(values: impl IntoIterator<Item = (u32, i64)>) -> Option<Spread> {
        let mut out: Option<Spread> = None;
        for (rank, v) in values {
            out = Some(match out {
                None => Spread {
                    max: v,
                    min: v,
                    max_rank: rank,
                    imbalance: 0,
                },
                Some(s) => {
                    let (max, max_rank) = if v > s.max {
                        (v, rank)
                    } else {
                        (s.max, s.max_rank)
                    };
                    let min = s.min.min(v);
                    Spread {
                        max,
                        min,
                        max_rank,
                        imbalance: max - min,
                    }
                }
            });
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_names_the_rank_of_the_max_and_the_imbalance() {
        let s = Spread::of([(0, 10), (1, 40), (2, 40), (3, 5)]).unwrap();
        assert_eq!(
            s,
            Spread {
                max: 40,
                min: 5,
                max_rank: 1,
                imbalance: 35
            }
        );
        assert_eq!(Spread::of(std::iter::empty()), None);
        let one = Spread::of([(3, -7)]).unwrap();
        assert_eq!(
            (one.max, one.min, one.max_rank, one.imbalance),
            (-7, -7, 3, 0)
        );
    }
}
