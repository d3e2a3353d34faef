//! The plot's panels and what each shows, taken from the reports: the peak by site, the step
//! over module calls,
//! bytes saved and parameter bytes per module, each targeted line's peak and Δ; drawn by draw.rs.
use super::Source;
use crate::model::profile::{ModuleEntry, Profile};
use plotters::prelude::*;

pub const FORWARD: RGBColor = RGBColor(31, 119, 180);
pub const BACKWARD: RGBColor = RGBColor(255, 127, 14);
pub const PEAK: RGBColor = RGBColor(214, 39, 40);
const DELTA: RGBColor = RGBColor(44, 160, 44);
/// One colour per rank (matplotlib's tab10, which FairScale's plots use too).
const SERIES: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];
/// Bars per panel at most: the largest, kept in their order.
const MOST_BARS: usize = 30;
const BAR_PX: u32 = 16;

pub struct Panel {
    pub height: u32,
    pub content: Content,
}

pub enum Content {
    Timeline {
        title: String,
        series: Vec<TimelineSeries>,
    },
    Bars {
        title: String,
        rows: Vec<BarRow>,
        legend: Vec<(String, RGBColor)>,
    },
    Note(String),
}

/// Allocated bytes when each module call started, in start order, and the peak during it.
pub struct TimelineSeries {
    pub label: Option<String>,
    pub color: Option<RGBColor>,
    pub points: Vec<TimelinePoint>,
}

pub struct TimelinePoint {
    pub start: i64,
    pub peak: Option<i64>,
    pub backward: bool,
    pub name: String,
}

pub struct BarRow {
    pub label: String,
    pub bars: Vec<(i64, RGBColor)>,
}

/// The panels that the reports have data for, and a note for each that has none.
pub fn plan(sources: &[Source<'_>]) -> super::Plan {
    let mut panels = Vec::new();
    let mut notes = Vec::new();
    match peak_bars(sources) {
        Some(p) => panels.push(p),
        None => notes.push("the peak by site: the report has no peak record".to_string()),
    }
    let with_modules: Vec<&Source<'_>> = sources
        .iter()
        .filter(|s| {
            s.profile
                .modules
                .as_ref()
                .is_some_and(|m| !m.timeline.is_empty())
        })
        .collect();
    if with_modules.is_empty() {
        notes.push(
            "memory over module calls, saved and parameter bytes per module: the report has no \
             module data (run with --modules)"
                .to_string(),
        );
    } else {
        panels.push(timeline(&with_modules));
        for (title, value) in [
            (
                "Bytes saved for backward per module call (leaf modules, forward order)",
                saved_per_call as fn(&ModuleEntry) -> i64,
            ),
            (
                "Parameter bytes per module (leaf modules, forward order)",
                |e: &ModuleEntry| e.parameter_bytes,
            ),
        ] {
            match module_bars(&with_modules, title, value) {
                Some(p) => panels.push(p),
                None => notes.push(format!("{title}: none in the report")),
            }
        }
    }
    let functions = function_bars(sources);
    if functions.is_empty() {
        notes.push("lines of targeted functions: no function was measured (-f)".into());
    }
    panels.extend(functions);
    let with_data = panels.len();
    for n in &notes {
        panels.push(Panel {
            height: 28,
            content: Content::Note(format!("No plot: {n}")),
        });
    }
    super::Plan {
        panels,
        with_data,
        notes,
    }
}

/// The first report's peak sites, largest first, with each report's bytes at its own peak.
fn peak_bars(sources: &[Source<'_>]) -> Option<Panel> {
    let first = sources.iter().find_map(|s| s.profile.peak.as_ref())?;
    let key =
        |s: &crate::model::peak::PeakSite| (s.at.label(), s.at.context.as_ref().map(|c| c.line));
    let rows: Vec<BarRow> = first
        .sites
        .iter()
        .take(MOST_BARS)
        .map(|site| BarRow {
            label: site.at.label(),
            bars: sources
                .iter()
                .enumerate()
                .map(|(k, s)| {
                    let bytes = s
                        .profile
                        .peak
                        .as_ref()
                        .and_then(|p| p.sites.iter().find(|o| key(o) == key(site)))
                        .map_or(0, |o| o.bytes);
                    (bytes, color_for(sources.len(), k, PEAK))
                })
                .collect(),
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let title = format!(
        "The peak by the line that allocated it: live bytes at allocated_bytes.all.peak ({})",
        crate::model::units::bytes(first.allocated_bytes)
    );
    let refs: Vec<&Source<'_>> = sources.iter().collect();
    Some(bar_panel(title, rows, legend(&refs, None)))
}

/// `layer1.0.conv2 (Conv2d)`: a module's name in its root, and its type when the report has it.
fn module_label(
    modules: &crate::model::profile::ModulesProfile,
    root: &str,
    module: &str,
) -> String {
    let name = if module.is_empty() { root } else { module };
    match modules
        .modules
        .iter()
        .find(|m| m.root == root && m.module == module)
    {
        Some(m) if !module.is_empty() => format!("{name} ({})", m.kind),
        _ => name.to_string(),
    }
}

fn saved_per_call(e: &ModuleEntry) -> i64 {
    e.saved_bytes.unwrap_or(0) / e.calls.max(1) as i64
}

fn timeline(sources: &[&Source<'_>]) -> Panel {
    let several = sources.len() > 1;
    let series = sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let modules = s.profile.modules.as_ref().expect("filtered on modules");
            TimelineSeries {
                label: several.then(|| s.label.clone()),
                color: several.then(|| SERIES[i % SERIES.len()]),
                points: modules
                    .timeline
                    .iter()
                    .filter_map(|e| {
                        Some(TimelinePoint {
                            start: e.start_bytes?,
                            peak: e.peak_bytes,
                            backward: e.phase == "backward",
                            name: module_label(modules, &e.root, &e.module),
                        })
                    })
                    .collect(),
            }
        })
        .collect();
    let dropped: u64 = sources
        .iter()
        .filter_map(|s| s.profile.modules.as_ref())
        .map(|m| m.timeline_dropped)
        .sum();
    let mut title =
        "Allocated memory over module calls (at each call's start; dots: the peak during it)"
            .to_string();
    if dropped > 0 {
        title.push_str(&format!(" — {dropped} later calls not recorded"));
    }
    Panel {
        height: 460,
        content: Content::Timeline { title, series },
    }
}

/// Leaf modules (no row of the report lies under them) in forward order, with `value` per
/// report; the MOST_BARS largest are kept.
fn module_bars(
    sources: &[&Source<'_>],
    title: &str,
    value: fn(&ModuleEntry) -> i64,
) -> Option<Panel> {
    let first = sources[0].profile.modules.as_ref()?;
    let forward: Vec<&ModuleEntry> = first
        .modules
        .iter()
        .filter(|e| e.phase == "forward")
        .collect();
    let is_leaf = |e: &ModuleEntry| {
        !forward.iter().any(|o| {
            o.root == e.root
                && o.depth > e.depth
                && (e.module.is_empty() || o.module.starts_with(&format!("{}.", e.module)))
        })
    };
    let lookup = |p: &Profile, e: &ModuleEntry| -> i64 {
        p.modules
            .as_ref()
            .and_then(|m| {
                m.modules
                    .iter()
                    .find(|o| o.phase == "forward" && o.root == e.root && o.module == e.module)
            })
            .map(value)
            .unwrap_or(0)
    };
    let mut rows: Vec<(usize, BarRow, i64)> = forward
        .iter()
        .filter(|e| is_leaf(e))
        .enumerate()
        .map(|(i, e)| {
            let bars: Vec<(i64, RGBColor)> = sources
                .iter()
                .enumerate()
                .map(|(k, s)| (lookup(s.profile, e), color_for(sources.len(), k, FORWARD)))
                .collect();
            let largest = bars.iter().map(|b| b.0).max().unwrap_or(0);
            let label = module_label(first, &e.root, &e.module);
            (i, BarRow { label, bars }, largest)
        })
        .filter(|(_, _, largest)| *largest > 0)
        .collect();
    if rows.is_empty() {
        return None;
    }
    let total = rows.len();
    rows.sort_by_key(|r| std::cmp::Reverse(r.2));
    rows.truncate(MOST_BARS);
    rows.sort_by_key(|r| r.0);
    let title = if total > MOST_BARS {
        format!("{title}: the {MOST_BARS} largest of {total}")
    } else {
        title.to_string()
    };
    Some(bar_panel(
        title,
        rows.into_iter().map(|r| r.1).collect(),
        legend(sources, None),
    ))
}

fn color_for(n: usize, k: usize, single: RGBColor) -> RGBColor {
    if n > 1 {
        SERIES[k % SERIES.len()]
    } else {
        single
    }
}

fn legend(sources: &[&Source<'_>], single: Option<&[(&str, RGBColor)]>) -> Vec<(String, RGBColor)> {
    if sources.len() > 1 {
        sources
            .iter()
            .enumerate()
            .map(|(k, s)| (s.label.clone(), SERIES[k % SERIES.len()]))
            .collect()
    } else {
        single
            .unwrap_or(&[])
            .iter()
            .map(|(n, c)| (n.to_string(), *c))
            .collect()
    }
}

fn bar_panel(title: String, rows: Vec<BarRow>, legend: Vec<(String, RGBColor)>) -> Panel {
    let bars: u32 = rows.iter().map(|r| r.bars.len() as u32).sum();
    let height = 110 + bars * BAR_PX + rows.len() as u32 * 6;
    Panel {
        height,
        content: Content::Bars {
            title,
            rows,
            legend,
        },
    }
}

/// Per targeted function (of the first report), each line that ran: its peak and its Δ, per
/// report.
fn function_bars(sources: &[Source<'_>]) -> Vec<Panel> {
    let Some(first) = sources.first() else {
        return Vec::new();
    };
    let refs: Vec<&Source<'_>> = sources.iter().collect();
    let peak_key = peak_key(first.profile);
    let mut panels = Vec::new();
    for f in &first.profile.functions {
        let lines: Vec<_> = f.lines.iter().filter(|l| l.hits > 0).collect();
        if lines.is_empty() {
            continue;
        }
        // The same function in each report (a rank may lack it, or some of its lines).
        let same: Vec<_> = sources
            .iter()
            .map(|s| {
                s.profile
                    .functions
                    .iter()
                    .find(|g| g.qualname == f.qualname)
            })
            .collect();
        let rows = lines
            .iter()
            .map(|l| {
                let mut bars = Vec::new();
                for (k, g) in same.iter().enumerate() {
                    let same = g.and_then(|g| g.lines.iter().find(|m| m.line == l.line));
                    if let Some(key) = &peak_key {
                        let v = same.and_then(|m| m.stats.get(key)).copied().unwrap_or(0);
                        bars.push((v, color_for(sources.len(), k, PEAK)));
                    }
                    let d = same.and_then(|m| m.delta_bytes).unwrap_or(0);
                    let c = if sources.len() > 1 {
                        lighter(SERIES[k % SERIES.len()])
                    } else {
                        DELTA
                    };
                    bars.push((d, c));
                }
                BarRow {
                    label: format!("{:>4}  {}", l.line, shorten(l.source.trim(), 52)),
                    bars,
                }
            })
            .collect();
        let peak_name = peak_key.clone().unwrap_or_else(|| "no peak column".into());
        let single: Vec<(&str, RGBColor)> = match &peak_key {
            Some(k) => vec![
                (k.as_str(), PEAK),
                ("Δ allocated (summed over hits)", DELTA),
            ],
            None => vec![("Δ allocated (summed over hits)", DELTA)],
        };
        let mut legend = legend(&refs, Some(&single));
        if sources.len() > 1 {
            legend.push((format!("each rank: {peak_name}, then Δ (lighter)"), WHITE));
        }
        panels.push(bar_panel(
            format!(
                "{} ({}:{}): per line, {peak_name} and Δ",
                f.qualname,
                crate::model::profile::file_name(&f.file),
                f.first_line
            ),
            rows,
            legend,
        ));
    }
    panels
}

/// The peak column to draw per line: allocated_bytes.all.peak when shown, else the first peak.
fn peak_key(p: &Profile) -> Option<String> {
    let keys: Vec<&str> = p.metadata.stats.iter().map(|s| s.key.as_str()).collect();
    if keys.contains(&"allocated_bytes.all.peak") {
        return Some("allocated_bytes.all.peak".into());
    }
    keys.iter()
        .find(|k| k.ends_with(".peak"))
        .map(|k| k.to_string())
}

fn lighter(c: RGBColor) -> RGBColor {
    let mix = |v: u8| ((v as u16 + 2 * 255) / 3) as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}
