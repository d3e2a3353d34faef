//! Which ranks stand out among a job's peaks: the largest, the smallest, and every rank far
//! from the rest by a robust rule (the median absolute deviation), so that one slow-leaking or
//! imbalanced rank among 1024 is named, and a uniform job names only its two ends.
use crate::model::merged::{MergedPeak, Outlier, RankReport};
use std::collections::HashMap;

/// How many robust standard deviations from the median make a rank far from the rest (the
/// modified z-score's usual cut, Iglewicz and Hoaglin).
const FAR_DEVIATIONS: f64 = 3.5;
/// A rank this close to the median (a fraction of it) is never far, whatever the deviation: a
/// job whose ranks are equal to the byte but one has MAD 0.
const NEAR_FRACTION: f64 = 0.01;

/// Fewer ranks than this have no "rest" to be far from: only their largest and smallest are
/// named (and a job that small prints every rank's detail).
const MIN_RANKS_FOR_FAR: usize = 5;

/// The ranks of `peak` to name, largest peak first; none when every rank's peak is the same.
pub fn outliers(peak: &MergedPeak, ranks: &[RankReport]) -> Vec<Outlier> {
    let d = &peak.distribution.allocated_bytes;
    if d.max == d.min {
        return Vec::new();
    }
    let median = d.median;
    let mut deviations: Vec<i64> = peak
        .ranks
        .iter()
        .map(|r| (r.allocated_bytes - median).abs())
        .collect();
    deviations.sort_unstable();
    let mad = deviations[(deviations.len() - 1) / 2] as f64;
    let far_beyond = (FAR_DEVIATIONS * 1.4826 * mad).max(NEAR_FRACTION * median.abs() as f64);
    let hosts: HashMap<u32, &str> = ranks.iter().map(|r| (r.rank, r.host.as_str())).collect();
    let mut out: Vec<Outlier> = peak
        .ranks
        .iter()
        .filter_map(|r| {
            let from = r.allocated_bytes - median;
            let far = peak.ranks.len() >= MIN_RANKS_FOR_FAR && from.abs() as f64 > far_beyond;
            let kind = match (r.rank == d.max_rank, r.rank == d.min_rank, far) {
                (true, _, true) => "far_above",
                (true, _, false) => "largest",
                (_, true, true) => "far_below",
                (_, true, false) => "smallest",
                (_, _, true) if from > 0 => "far_above",
                (_, _, true) => "far_below",
                _ => return None,
            };
            Some(Outlier {
                rank: r.rank,
                host: hosts.get(&r.rank).unwrap_or(&"").to_string(),
                allocated_bytes: r.allocated_bytes,
                from_median_bytes: from,
                kind: kind.to_string(),
            })
        })
        .collect();
    out.sort_by_key(|o| (std::cmp::Reverse(o.allocated_bytes), o.rank));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::merged::{PeakDistribution, Quantiles, RankPeak, Spread};

    fn peak_of(values: &[i64]) -> MergedPeak {
        let pairs = || values.iter().enumerate().map(|(r, v)| (r as u32, *v));
        MergedPeak {
            allocated_bytes: Spread::of(pairs()).unwrap(),
            reserved_bytes: Spread::of(pairs()).unwrap(),
            ranks: pairs()
                .map(|(rank, v)| RankPeak {
                    rank,
                    allocated_bytes: v,
                    reserved_bytes: v,
                    reached: None,
                    in_backward: false,
                    categories: Default::default(),
                    device: None,
                })
                .collect(),
            ranks_without_peak: Vec::new(),
            distribution: PeakDistribution {
                allocated_bytes: Quantiles::of(pairs()).unwrap(),
                reserved_bytes: Quantiles::of(pairs()).unwrap(),
            },
            outliers: Vec::new(),
            sites: Vec::new(),
        }
    }

    fn named(values: &[i64]) -> Vec<(u32, String)> {
        outliers(&peak_of(values), &[])
            .into_iter()
            .map(|o| (o.rank, o.kind))
            .collect()
    }

    #[test]
    fn a_uniform_job_names_its_ends_and_one_far_rank_is_named_as_far() {
        let mut values: Vec<i64> = (0..64).map(|r| 1_000_000 + (r * 37 % 11) * 1000).collect();
        assert_eq!(
            named(&values),
            vec![(8, "largest".to_string()), (0, "smallest".to_string())]
        );
        values[40] = 1_300_000;
        values[9] = 700_000;
        assert_eq!(
            named(&values),
            vec![(40, "far_above".to_string()), (9, "far_below".to_string())]
        );
        values[41] = 1_250_000;
        assert_eq!(named(&values)[1], (41, "far_above".to_string()));
    }

    #[test]
    fn equal_ranks_name_none_and_a_tiny_difference_is_never_far() {
        assert!(named(&[5; 8]).is_empty());
        // Two ranks have no rest to be far from.
        assert_eq!(
            named(&[1_000, 9_000]),
            vec![(1, "largest".to_string()), (0, "smallest".to_string())]
        );
        // All equal to the byte but one, 0.5% above: MAD is 0, yet it is only the largest.
        let mut values = vec![1_000_000; 8];
        values[3] = 1_005_000;
        assert_eq!(named(&values)[0], (3, "largest".to_string()));
    }
}
