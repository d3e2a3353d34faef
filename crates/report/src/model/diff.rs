//! A diff of two runs' reports (`schema: memprof.diff/1`): per function, line and module row,
//! each compared number in both runs and the change; and the `--max-increase` results.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const DIFF_SCHEMA: &str = "memprof.diff/1";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Diff {
    pub schema: String,
    pub base: String,
    pub new: String,
    /// The keys compared: `delta` and the stats both reports measured.
    pub compared: Vec<String>,
    /// Those of them that count bytes (the others count allocations, retries, ...).
    pub byte_keys: Vec<String>,
    /// Those of them that are summed over a line's hits (`delta` and the like); the others are
    /// levels or peaks.
    #[serde(default)]
    pub summed_keys: Vec<String>,
    /// What could not be compared (other devices, stats only one report has).
    pub notes: Vec<String>,
    pub functions: Vec<FunctionDiff>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<ModuleDiff>,
    /// The two runs' peaks and their sites, when both reports have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<PeakDiff>,
    /// The largest increase of any compared byte count of the allocator of any function (its net
    /// Δ per call, or the highest level or peak over its lines); of host RSS only when none of
    /// the allocator's grew.
    pub largest_increase: Option<Increase>,
    /// `--max-increase`: each limit and the lines that went beyond it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitResult>,
}

/// One number in both reports.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Change {
    pub base: Option<i64>,
    pub new: Option<i64>,
    /// new − base, when both exist (an added or removed line counts the other side as 0).
    pub change: Option<i64>,
}

impl Change {
    pub fn of(base: Option<i64>, new: Option<i64>, missing_is_zero: bool) -> Change {
        let (b, n) = if missing_is_zero {
            (base.or(Some(0)), new.or(Some(0)))
        } else {
            (base, new)
        };
        Change {
            base,
            new,
            change: b.zip(n).map(|(b, n)| n - b),
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct FunctionDiff {
    pub qualname: String,
    /// `both`, `added` (only in NEW) or `removed` (only in BASE).
    pub status: String,
    pub calls: Change,
    pub peak_allocated_bytes: Change,
    pub lines: Vec<LineDiff>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LineDiff {
    /// `same` (the source text matched), `added` or `removed`.
    pub status: String,
    pub base_line: Option<u32>,
    pub new_line: Option<u32>,
    pub source: String,
    pub delta_bytes: Change,
    pub stats: BTreeMap<String, Change>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ModuleDiff {
    pub root: String,
    pub module: String,
    pub phase: String,
    pub peak_bytes: Change,
    pub peak_increase_bytes: Change,
    pub saved_bytes: Change,
}

/// The peaks of both runs, and per site (matched by file name, function, source text and the
/// context's source text, so that shifted lines still match) its live bytes at each peak.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PeakDiff {
    pub allocated_bytes: Change,
    pub reserved_bytes: Change,
    /// Bytes by category at each peak (a category one peak lacks counts 0 there).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub categories: std::collections::BTreeMap<String, Change>,
    /// The process's device memory at each peak, as the device split has it (CUDA), or the
    /// resident peak (CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<Change>,
    /// Largest change first; a site only one peak listed counts 0 in the other.
    pub sites: Vec<PeakSiteDiff>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PeakSiteDiff {
    /// `both`, `added` (only in NEW's peak) or `removed`.
    pub status: String,
    /// Where, as NEW has it, else BASE.
    #[serde(flatten)]
    pub at: super::peak::SiteAt,
    pub bytes: Change,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Increase {
    pub function: String,
    /// The line, for an increase of one line; None for a function's (`source` says what).
    pub line: Option<u32>,
    pub source: String,
    pub key: String,
    pub base: i64,
    pub new: i64,
    pub change: i64,
}

/// `--max-increase KEY=SIZE|PERCENT`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LimitResult {
    pub spec: String,
    pub key: String,
    /// Bytes (or a count), or a percentage of the base value.
    pub bytes: Option<i64>,
    pub percent: Option<f64>,
    pub exceeded: Vec<Increase>,
}

/// Whether `key` is summed over a line's hits (Δ and the like), not a level or a peak; `summed`
/// is the diff's `summed_keys`.
pub fn is_summed(key: &str, summed: &[String]) -> bool {
    key == super::profile::DELTA || summed.iter().any(|s| s == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_sided_line_counts_the_other_side_as_zero() {
        assert_eq!(Change::of(None, Some(5), true).change, Some(5));
        assert_eq!(Change::of(None, Some(5), false).change, None);
        assert_eq!(Change::of(Some(7), Some(5), false).change, Some(-2));
    }
}
