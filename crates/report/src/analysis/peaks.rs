//! The peak record across reports: the ranks' peaks merged (their distribution; per site max,
//! median and min over the ranks) for `memprof merge`, and two runs' peaks compared (per site) for `memprof diff`.
use crate::model::diff::{Change, PeakDiff, PeakSiteDiff};
use crate::model::merged::{
    MergedPeak, MergedPeakSite, PeakDistribution, Quantiles, RankPeak, Spread,
};
use crate::model::peak::{DeviceSplit, Peak, PeakSite};
use crate::model::profile::file_name;
use std::collections::HashMap;

/// A site across ranks: file name, line, function and the context's file name and line.
type RankKey = (String, u32, String, Option<(String, u32)>);

fn rank_key(s: &PeakSite) -> RankKey {
    let p = &s.at.place;
    (
        file_name(&p.file).to_string(),
        p.line,
        p.function.clone(),
        s.at.context
            .as_ref()
            .map(|c| (file_name(&c.file).to_string(), c.line)),
    )
}

/// The ranks' peaks, `(rank, peak)` in rank order, and the ranks whose reports have none;
/// None when no report has one.
pub fn merge(peaks: &[(u32, &Peak)], without: Vec<u32>) -> Option<MergedPeak> {
    let allocated_bytes = Spread::of(peaks.iter().map(|(r, p)| (*r, p.allocated_bytes)))?;
    let reserved_bytes = Spread::of(peaks.iter().map(|(r, p)| (*r, p.reserved_bytes)))?;
    let distribution = PeakDistribution {
        allocated_bytes: Quantiles::of(peaks.iter().map(|(r, p)| (*r, p.allocated_bytes)))?,
        reserved_bytes: Quantiles::of(peaks.iter().map(|(r, p)| (*r, p.reserved_bytes)))?,
    };
    let ranks = peaks
        .iter()
        .map(|(rank, p)| RankPeak {
            rank: *rank,
            allocated_bytes: p.allocated_bytes,
            reserved_bytes: p.reserved_bytes,
            reached: p
                .reached
                .site
                .as_ref()
                .map(|s| format!("{}:{} {}", file_name(&s.file), s.line, s.function)),
            in_backward: p.reached.in_backward,
            categories: p.categories.clone(),
            device: p.device.clone(),
        })
        .collect();
    // Each site with the ranks that listed it, in order of first appearance.
    let mut by_site: Vec<Vec<(u32, &PeakSite)>> = Vec::new();
    let mut index: HashMap<RankKey, usize> = HashMap::new();
    for (r, p) in peaks {
        for s in &p.sites {
            let i = *index.entry(rank_key(s)).or_insert_with(|| {
                by_site.push(Vec::new());
                by_site.len() - 1
            });
            by_site[i].push((*r, s));
        }
    }
    let n = peaks.len() as u32;
    let mut sites: Vec<MergedPeakSite> = by_site
        .into_iter()
        .filter_map(|found| {
            let (_, first) = *found.first()?;
            Some(MergedPeakSite {
                at: first.at.clone(),
                ranks: ((found.len() as u32) < n).then_some(found.len() as u32),
                bytes: Spread::of(found.iter().map(|(r, s)| (*r, s.bytes)))?,
            })
        })
        .collect();
    sites.sort_by_key(|s| std::cmp::Reverse(s.bytes.max));
    Some(MergedPeak {
        allocated_bytes,
        reserved_bytes,
        ranks,
        ranks_without_peak: without,
        distribution,
        outliers: Vec::new(),
        sites,
    })
}

/// A site across runs: file name, function, source text and the context's source text (line
/// numbers shift when code is edited). The run's own script is named by its role, not its file
/// name, so that a renamed copy (`train_v2.py` against `train.py`) still matches.
type RunKey = (String, String, String, Option<String>);

fn run_key(s: &PeakSite, script: Option<&str>) -> RunKey {
    let p = &s.at.place;
    let file = file_name(&p.file);
    let file = match script.map(file_name) {
        Some(script) if script == file => "<the script>",
        _ => file,
    };
    (
        file.to_string(),
        p.function.clone(),
        p.source.clone(),
        s.at.context.as_ref().map(|c| c.source.clone()),
    )
}

/// Two runs' peaks compared, each with the script it ran (`metadata.script`); None unless both
/// have one.
pub fn diff(
    base: Option<&Peak>,
    new: Option<&Peak>,
    scripts: (Option<&str>, Option<&str>),
) -> Option<PeakDiff> {
    let (base, new) = (base?, new?);
    let base_key = |s: &PeakSite| run_key(s, scripts.0);
    let new_key = |s: &PeakSite| run_key(s, scripts.1);
    let mut sites: Vec<PeakSiteDiff> = Vec::new();
    for n in &new.sites {
        let b = base.sites.iter().find(|b| base_key(b) == new_key(n));
        sites.push(site_diff(b, Some(n)));
    }
    for b in &base.sites {
        if !new.sites.iter().any(|n| new_key(n) == base_key(b)) {
            sites.push(site_diff(Some(b), None));
        }
    }
    sites.sort_by_key(|s| std::cmp::Reverse(s.bytes.change.unwrap_or(0).abs()));
    let mut categories = std::collections::BTreeMap::new();
    if !base.categories.is_empty() && !new.categories.is_empty() {
        for name in base.categories.keys().chain(new.categories.keys()) {
            categories.entry(name.clone()).or_insert_with(|| {
                Change::of(
                    base.categories.get(name).copied(),
                    new.categories.get(name).copied(),
                    true,
                )
            });
        }
    }
    let device_bytes = |p: &Peak| {
        p.device.as_ref().map(|d| match d {
            DeviceSplit::Cuda(c) => c.process_bytes,
            DeviceSplit::Cpu(h) => h.rss_peak_bytes,
        })
    };
    let device_bytes = match (device_bytes(base), device_bytes(new)) {
        (None, None) => None,
        (b, n) => Some(Change::of(b, n, false)),
    };
    Some(PeakDiff {
        allocated_bytes: Change::of(Some(base.allocated_bytes), Some(new.allocated_bytes), false),
        reserved_bytes: Change::of(Some(base.reserved_bytes), Some(new.reserved_bytes), false),
        categories,
        device_bytes,
        sites,
    })
}

fn site_diff(base: Option<&PeakSite>, new: Option<&PeakSite>) -> PeakSiteDiff {
    let s = new.or(base).expect("one side at least");
    PeakSiteDiff {
        status: match (base, new) {
            (Some(_), Some(_)) => "both",
            (None, _) => "added",
            _ => "removed",
        }
        .to_string(),
        at: s.at.clone(),
        bytes: Change::of(base.map(|b| b.bytes), new.map(|n| n.bytes), true),
    }
}
