//! A merged report's summary, the same length at 2 ranks or 1024: where the ranks ran (hosts,
//! devices, outcomes, missing ranks), their peaks as a distribution (min, median, p90, max), the
//! ranks that stand out, the hosts by their peaks, each chosen rank's detail, and the peak's
//! sites across the ranks (the largest first, the rest counted).
use super::style::{styled, write};
use crate::model::merged::*;
use crate::model::units;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Whose per-rank detail the table prints.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum RankDetail {
    /// Every rank's when there are at most `AUTO_DETAIL_RANKS`, else none.
    #[default]
    Auto,
    All,
    These(Vec<u32>),
}

/// Up to this many ranks, the detail of each is printed unasked.
pub const AUTO_DETAIL_RANKS: usize = 8;
/// Outliers named; more are counted.
const OUTLIERS_SHOWN: usize = 8;
/// Hosts listed one per row; more are shown by their highest and lowest peaks.
const HOSTS_SHOWN: usize = 8;
/// Peak sites listed; more are counted.
pub const SITES_SHOWN: usize = 20;

/// The header: what was merged, where the ranks ran, how they ended.
pub fn header(out: &mut String, m: &Merged) {
    let md = &m.metadata;
    let _ = writeln!(
        out,
        "memprof {} · torch {} · merged: {} of {} ranks{}",
        md.memprof_version,
        md.torch_version,
        md.ranks.len(),
        md.world_size,
        md.script
            .as_deref()
            .map(|s| format!(" of {s}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "{} · {}",
        hosts_line(&md.hosts),
        devices_line(&md.ranks)
    );
    let _ = writeln!(out, "{}", outcomes_line(&md.ranks));
    if !md.missing_ranks.is_empty() {
        let _ = writeln!(
            out,
            "Missing: no report of rank{} {} (of {})",
            if md.missing_ranks.len() == 1 { "" } else { "s" },
            rank_list(&md.missing_ranks),
            md.world_size
        );
    }
}

/// `Hosts: 128, 8 ranks each`, `Host: vm, all 2 ranks`, `Hosts: 3 (2 with 4 ranks, 1 with 2)`.
fn hosts_line(hosts: &[HostRanks]) -> String {
    match hosts {
        [] => "Hosts: none named".into(),
        [one] => format!(
            "Host: {}, {} rank{}",
            one.host,
            one.ranks.len(),
            if one.ranks.len() == 1 { "" } else { "s" }
        ),
        _ => {
            let mut sizes: BTreeMap<usize, usize> = BTreeMap::new();
            for h in hosts {
                *sizes.entry(h.ranks.len()).or_default() += 1;
            }
            if sizes.len() == 1 {
                let (per, _) = sizes.iter().next().expect("one size");
                format!("Hosts: {}, {per} rank{} each", hosts.len(), plural(*per))
            } else {
                let parts: Vec<String> = sizes
                    .iter()
                    .rev()
                    .map(|(per, count)| format!("{count} with {per} rank{}", plural(*per)))
                    .collect();
                format!("Hosts: {} ({})", hosts.len(), parts.join(", "))
            }
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The devices by name (`cuda:3 (NVIDIA H100 80GB HBM3)` counts as `NVIDIA H100 80GB HBM3`).
fn devices_line(ranks: &[RankReport]) -> String {
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for r in ranks {
        let name = match (r.device.find('('), r.device.rfind(')')) {
            (Some(open), Some(close)) if open < close => &r.device[open + 1..close],
            _ => r.device.as_str(),
        };
        *names.entry(name).or_default() += 1;
    }
    let parts: Vec<String> = names
        .iter()
        .map(|(name, n)| {
            if names.len() == 1 {
                name.to_string()
            } else {
                format!("{name} ({n} ranks)")
            }
        })
        .collect();
    format!("device: {}", parts.join(", "))
}

/// `Outcome: all completed`, or the counts with the ranks that did not complete.
fn outcomes_line(ranks: &[RankReport]) -> String {
    let mut by: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for r in ranks {
        by.entry(r.outcome.as_str()).or_default().push(r.rank);
    }
    if by.len() == 1 {
        let (outcome, _) = by.iter().next().expect("one outcome");
        return format!("Outcome: all {outcome}");
    }
    let parts: Vec<String> = by
        .iter()
        .map(|(outcome, rs)| {
            if *outcome == "completed" {
                format!("{} completed", rs.len())
            } else {
                format!(
                    "{} {outcome} (rank{} {})",
                    rs.len(),
                    plural(rs.len()),
                    rank_list(rs)
                )
            }
        })
        .collect();
    format!("Outcome: {}", parts.join(", "))
}

/// The ranks' peaks: the distribution, the outliers, the hosts, the detail asked for, the
/// sites.
pub fn peak(out: &mut String, m: &Merged, detail: &RankDetail) {
    let Some(peak) = &m.peak else {
        ranks(out, m, None, detail);
        return;
    };
    out.push('\n');
    if peak.ranks.len() == 1 && !peak.ranks_without_peak.is_empty() {
        let _ = writeln!(
            out,
            "Peak of rank {} only: allocated_bytes.all.peak {} (no max, min or imbalance: the \
             other ranks have none)",
            peak.allocated_bytes.max_rank,
            units::bytes(peak.allocated_bytes.max),
        );
    } else {
        distribution(out, peak);
    }
    if !peak.ranks_without_peak.is_empty() {
        let _ = writeln!(
            out,
            "No peak: rank{} {} (their reports have none: they measured no allocation on their \
             device)",
            plural(peak.ranks_without_peak.len()),
            rank_list(&peak.ranks_without_peak)
        );
    }
    outliers(out, &peak.outliers);
    hosts(out, &m.metadata.hosts, peak);
    ranks(out, m, Some(peak), detail);
    sites(out, peak);
}

fn distribution(out: &mut String, peak: &MergedPeak) {
    let n = peak.ranks.len();
    let _ = writeln!(
        out,
        "Peak over {n} rank{}{}",
        plural(n),
        if peak.ranks_without_peak.is_empty() {
            ""
        } else {
            " that have one"
        }
    );
    let mut t = styled(&["", "min", "median", "p90", "max", "max − min"]);
    let d = &peak.distribution;
    for (name, q) in [
        ("allocated_bytes.all.peak", &d.allocated_bytes),
        ("reserved_bytes.all.peak", &d.reserved_bytes),
    ] {
        t.add_row(vec![
            name.to_string(),
            format!("{} (r{})", units::bytes(q.min), q.min_rank),
            units::bytes(q.median),
            units::bytes(q.p90),
            format!("{} (r{})", units::bytes(q.max), q.max_rank),
            units::bytes(q.max - q.min),
        ]);
    }
    write(out, t, 1..6);
}

fn outliers(out: &mut String, outliers: &[Outlier]) {
    if outliers.is_empty() {
        return;
    }
    let far = outliers
        .iter()
        .filter(|o| o.kind.starts_with("far"))
        .count();
    let _ = writeln!(
        out,
        "Ranks that stand out ({}):",
        match far {
            0 => "none far from the rest; the largest and smallest".to_string(),
            1 => "1 far from the rest".to_string(),
            n => format!("{n} far from the rest"),
        }
    );
    for o in outliers.iter().take(OUTLIERS_SHOWN) {
        let what = match o.kind.as_str() {
            "far_above" => "far above the rest",
            "far_below" => "far below the rest",
            "largest" => "the largest",
            _ => "the smallest",
        };
        let _ = writeln!(
            out,
            "  rank {} on {}: {} ({} from the median): {what}",
            o.rank,
            o.host,
            units::bytes(o.allocated_bytes),
            units::signed_bytes(o.from_median_bytes),
        );
    }
    if outliers.len() > OUTLIERS_SHOWN {
        let _ = writeln!(
            out,
            "  … {} more (all in --format json: peak.outliers)",
            outliers.len() - OUTLIERS_SHOWN
        );
    }
}

/// Per host: its ranks and their peaks' max (rank), median and min; with many hosts, those with
/// the highest and the lowest max.
fn hosts(out: &mut String, hosts: &[HostRanks], peak: &MergedPeak) {
    if hosts.len() < 2 {
        return;
    }
    let by_rank: BTreeMap<u32, i64> = peak
        .ranks
        .iter()
        .map(|r| (r.rank, r.allocated_bytes))
        .collect();
    let mut rows: Vec<(&HostRanks, Spread)> = hosts
        .iter()
        .filter_map(|h| {
            let s = Spread::of(
                h.ranks
                    .iter()
                    .filter_map(|r| by_rank.get(r).map(|v| (*r, *v))),
            )?;
            Some((h, s))
        })
        .collect();
    rows.sort_by_key(|(h, s)| (std::cmp::Reverse(s.max), h.ranks.first().copied()));
    let shown: Vec<usize> = if rows.len() <= HOSTS_SHOWN {
        (0..rows.len()).collect()
    } else {
        let half = HOSTS_SHOWN / 2;
        (0..half).chain(rows.len() - half..rows.len()).collect()
    };
    out.push('\n');
    let _ = writeln!(
        out,
        "Hosts by their ranks' peaks{}",
        if shown.len() < rows.len() {
            format!(
                " (the {} highest and lowest of {})",
                HOSTS_SHOWN / 2,
                rows.len()
            )
        } else {
            String::new()
        }
    );
    let mut t = styled(&["Host", "Ranks", "max (rank)", "median", "min"]);
    for (k, &i) in shown.iter().enumerate() {
        if k > 0 && i != shown[k - 1] + 1 {
            t.add_row(vec![
                format!("… {} more", i - shown[k - 1] - 1),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        let (h, s) = &rows[i];
        t.add_row(vec![
            h.host.clone(),
            rank_list(&h.ranks),
            format!("{} (r{})", units::bytes(s.max), s.max_rank),
            units::bytes(s.median),
            units::bytes(s.min),
        ]);
    }
    write(out, t, 2..5);
}

/// Each chosen rank: where it ran, its file and outcome, its peak and what it was.
fn ranks(out: &mut String, m: &Merged, peak: Option<&MergedPeak>, detail: &RankDetail) {
    let all = &m.metadata.ranks;
    let chosen: Vec<&RankReport> = match detail {
        RankDetail::Auto if all.len() <= AUTO_DETAIL_RANKS => all.iter().collect(),
        RankDetail::Auto => Vec::new(),
        RankDetail::All => all.iter().collect(),
        RankDetail::These(these) => all.iter().filter(|r| these.contains(&r.rank)).collect(),
    };
    if chosen.is_empty() {
        let named: Vec<String> = peak
            .iter()
            .flat_map(|p| &p.outliers)
            .take(2)
            .map(|o| o.rank.to_string())
            .collect();
        let _ = writeln!(
            out,
            "Each rank's detail: merge --ranks {} (any list, e.g. 0-7,513) or --all-ranks",
            if named.is_empty() {
                "0".to_string()
            } else {
                named.join(",")
            }
        );
        return;
    }
    out.push('\n');
    let peaks: BTreeMap<u32, &RankPeak> = peak
        .iter()
        .flat_map(|p| &p.ranks)
        .map(|r| (r.rank, r))
        .collect();
    for r in chosen {
        let outcome = if r.outcome == "completed" {
            String::new()
        } else {
            format!(" · {}", r.outcome)
        };
        let _ = writeln!(
            out,
            "rank {} (local {}) on {}: {} · {}{outcome}",
            r.rank, r.local_rank, r.host, r.device, r.file
        );
        let Some(p) = peaks.get(&r.rank) else {
            let _ = writeln!(
                out,
                "  no peak (its report has none: it measured no allocation on its device)"
            );
            continue;
        };
        let _ = writeln!(
            out,
            "  peak {} allocated, {} reserved, reached {}{}",
            units::bytes(p.allocated_bytes),
            units::bytes(p.reserved_bytes),
            if p.in_backward {
                "in the backward run by "
            } else {
                "at "
            },
            p.reached.as_deref().unwrap_or("(no Python frame)")
        );
        let parts = super::peak::categories_text(&p.categories, p.allocated_bytes);
        if !parts.is_empty() {
            let _ = writeln!(out, "  what it is: {parts}");
        }
        if let Some(device) = &p.device {
            out.push_str("  ");
            super::peak::device_line(out, device);
        }
    }
}

/// Per site, its bytes at each rank's peak: max (rank), median, min, and on how many ranks.
fn sites(out: &mut String, peak: &MergedPeak) {
    if peak.sites.is_empty() {
        return;
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "Peak sites over the ranks: each site's bytes at each rank's peak{}",
        if peak.sites.len() > SITES_SHOWN {
            format!(" (the {SITES_SHOWN} largest of {})", peak.sites.len())
        } else {
            String::new()
        }
    );
    out.push('\n');
    let mut t = styled(&[
        "max (rank)",
        "median",
        "min",
        "Ranks",
        "Site",
        "Line Contents",
    ]);
    for s in peak.sites.iter().take(SITES_SHOWN) {
        t.add_row(vec![
            format!("{} (r{})", units::bytes(s.bytes.max), s.bytes.max_rank),
            units::bytes(s.bytes.median),
            units::bytes(s.bytes.min),
            s.ranks
                .map(|n| n.to_string())
                .unwrap_or_else(|| "all".into()),
            s.at.label(),
            s.at.place.source.clone(),
        ]);
    }
    write(out, t, 0..4);
    if peak.sites.len() > SITES_SHOWN {
        let _ = writeln!(
            out,
            "… {} more sites (all in --format json: peak.sites)",
            peak.sites.len() - SITES_SHOWN
        );
    }
}
