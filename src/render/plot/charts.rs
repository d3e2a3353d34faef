//! The plot's panels: what each shows, taken from the reports (plan), and how it is drawn
//! (draw). Bytes are drawn in one binary unit per panel, chosen by its largest value.
use super::Source;
use crate::model::profile::{ModuleEntry, Profile};
use crate::model::units;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const FORWARD: RGBColor = RGBColor(31, 119, 180);
const BACKWARD: RGBColor = RGBColor(255, 127, 14);
const PEAK: RGBColor = RGBColor(214, 39, 40);
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
const LABEL_AREA: u32 = 420;
const FONT: &str = "sans-serif";

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

/// An axis tick: no decimals when it is whole.
fn tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

type DrawResult<E> = Result<(), DrawingAreaErrorKind<E>>;

pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
) -> DrawResult<DB::ErrorType> {
    match &panel.content {
        Content::Timeline { title, series } => draw_timeline(area, title, series),
        Content::Bars {
            title,
            rows,
            legend,
        } => draw_bars(area, title, rows, legend),
        Content::Note(text) => area.draw(&Text::new(
            text.clone(),
            (20, 6),
            (FONT, 15).into_font().color(&RGBColor(90, 90, 90)),
        )),
    }
}

fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    series: &[TimelineSeries],
) -> DrawResult<DB::ErrorType> {
    let n = series
        .iter()
        .map(|s| s.points.len())
        .max()
        .unwrap_or(0)
        .max(2);
    let max = series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.peak.unwrap_or(p.start).max(p.start))
        })
        .max()
        .unwrap_or(1)
        .max(1);
    let (div, unit_name) = crate::model::units::axis_unit(max);
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..(n - 1) as f64, 0f64..max as f64 / div * 1.12)?;
    chart
        .configure_mesh()
        .x_desc("module calls, in the order they started")
        .y_desc(format!("allocated ({unit_name})"))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| tick(*v))
        .x_max_light_lines(1)
        .y_max_light_lines(1)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (k, s) in series.iter().enumerate() {
        let pts = &s.points;
        // Segments coloured by the phase of the call they lead to (one colour per rank when
        // several reports are drawn).
        let mut run_start: usize = 0;
        for i in 1..=pts.len() {
            let boundary =
                i == pts.len() || (s.color.is_none() && pts[i].backward != pts[i - 1].backward);
            if boundary {
                // From the previous run's last point, so the line has no gaps.
                let from = run_start.saturating_sub(1);
                let color = s.color.unwrap_or(if pts[run_start].backward {
                    BACKWARD
                } else {
                    FORWARD
                });
                chart.draw_series(LineSeries::new(
                    (from..i).map(|j| (j as f64, pts[j].start as f64 / div)),
                    color.stroke_width(2),
                ))?;
                run_start = i;
            }
        }
        chart.draw_series(pts.iter().enumerate().filter_map(|(i, p)| {
            let color = s
                .color
                .unwrap_or(if p.backward { BACKWARD } else { FORWARD });
            p.peak
                .map(|v| Circle::new((i as f64, v as f64 / div), 2, color.mix(0.5).filled()))
        }))?;
        // The peak, marked and named by the innermost call that reached it.
        if let Some((i, p)) = pts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.peak.is_some())
            .max_by_key(|(i, p)| (p.peak, *i))
        {
            let v = p.peak.unwrap_or(0);
            let xy = (i as f64, v as f64 / div);
            chart.draw_series(std::iter::once(Circle::new(xy, 6, PEAK.stroke_width(2))))?;
            let who = s
                .label
                .as_ref()
                .map(|l| format!("{l}: "))
                .unwrap_or_default();
            let text = format!(
                "{who}peak {} in {} ({})",
                units::bytes(v),
                p.name,
                if p.backward { "backward" } else { "forward" }
            );
            let right = i as f64 > (n as f64) * 0.6;
            let style = (FONT, 14).into_font().color(&PEAK).pos(Pos::new(
                if right { HPos::Right } else { HPos::Left },
                VPos::Bottom,
            ));
            // One label per series, stacked upwards, so that ranks at one peak stay readable.
            let (px, py) = chart.backend_coord(&xy);
            let base = area.get_base_pixel();
            area.draw(&Text::new(
                text,
                (px - base.0, py - base.1 - 6 - 17 * k as i32),
                style,
            ))?;
        }
    }
    // Legend: the phases, or the ranks.
    let entries: Vec<(String, RGBColor)> = if series.iter().any(|s| s.color.is_some()) {
        series
            .iter()
            .filter_map(|s| Some((s.label.clone()?, s.color?)))
            .collect()
    } else {
        vec![("forward".into(), FORWARD), ("backward".into(), BACKWARD)]
    };
    // Inside the plotting area, at its top left.
    draw_legend(area, &entries, (110, 44))
}

/// A legend: a colour swatch and a name per entry, one under the other from `(x, y)`; a white
/// entry is a line of text only.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, RGBColor)],
    (x, mut y): (i32, i32),
) -> DrawResult<DB::ErrorType> {
    for (name, color) in entries {
        if *color != WHITE {
            area.draw(&Rectangle::new([(x, y), (x + 14, y + 12)], color.filled()))?;
        }
        area.draw(&Text::new(
            name.clone(),
            (x + 20, y - 1),
            (FONT, 13).into_font(),
        ))?;
        y += 18;
    }
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    rows: &[BarRow],
    legend: &[(String, RGBColor)],
) -> DrawResult<DB::ErrorType> {
    let values = rows.iter().flat_map(|r| r.bars.iter().map(|b| b.0));
    let (lo, hi) = values.fold((0i64, 0i64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (div, unit_name) = crate::model::units::axis_unit(hi.max(-lo).max(1));
    let span = (hi - lo).max(1) as f64 / div;
    let x0 = lo as f64 / div - if lo < 0 { span * 0.15 } else { 0.0 };
    let x1 = hi as f64 / div + span * 0.22;
    // One unit of y per bar, plus a gap between rows; rows top to bottom.
    let slots: Vec<(usize, usize)> = rows
        .iter()
        .enumerate()
        .flat_map(|(r, row)| (0..row.bars.len()).map(move |b| (r, b)))
        .collect();
    let gap = 0.4;
    let total = slots.len() as f64 + gap * rows.len() as f64;
    let legend_px = 18 * legend.len() as u32 + 8;
    let (top, body) = area.split_vertically(28 + legend_px);
    top.draw(&Text::new(
        title.to_string(),
        (14, 6),
        (FONT, 18).into_font(),
    ))?;
    draw_legend(&top, legend, (20, 32))?;
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(LABEL_AREA)
        .build_cartesian_2d(x0..x1, 0f64..total)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc(unit_name.to_string())
        .x_label_formatter(&|v| tick(*v))
        .x_max_light_lines(1)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let label_font = (FONT, 13).into_font();
    let mut y = total;
    let base = body.get_base_pixel();
    for row in rows {
        let row_top = y;
        for (v, color) in &row.bars {
            let (a, b) = (0f64, *v as f64 / div);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(a.min(b), y - 0.9), (a.max(b), y - 0.1)],
                color.filled(),
            )))?;
            let style = label_font
                .clone()
                .color(&RGBColor(60, 60, 60))
                .pos(Pos::new(
                    if *v < 0 { HPos::Right } else { HPos::Left },
                    VPos::Center,
                ));
            let at = if *v < 0 {
                b - span * 0.01
            } else {
                b + span * 0.01
            };
            chart.draw_series(std::iter::once(Text::new(
                units::bytes(*v),
                (at, y - 0.5),
                style,
            )))?;
            y -= 1.0;
        }
        // The row's name, right-aligned against the plotting area.
        let middle = (row_top + y) / 2.0;
        let (px, py) = chart.backend_coord(&(x0, middle));
        body.draw(&Text::new(
            row.label.clone(),
            (px - base.0 - 8, py - base.1),
            TextStyle::from(label_font.clone()).pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
        y -= gap;
    }
    if lo < 0 {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(0.0, 0.0), (0.0, total)],
            BLACK.stroke_width(1),
        )))?;
    }
    Ok(())
}
