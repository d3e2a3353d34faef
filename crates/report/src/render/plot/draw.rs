//! How the panels are drawn: the timeline of module calls, bar charts and their legends. Bytes
//! are drawn in one binary unit per panel, chosen by its largest value.
use super::plan::{BarRow, Content, Panel, TimelineSeries, BACKWARD, FORWARD, PEAK};
use crate::model::units;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const LABEL_AREA: u32 = 420;
const FONT: &str = "sans-serif";

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
