//! The live view's picture of a `LiveState` (ratatui widgets): a header line, memory now and at
//! its highest, a sparkline of memory over time, the top sites now, the growing sites.
use crate::model::live::LiveState;
use crate::model::units;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline};
use ratatui::Frame;

/// Rows the view takes (its inline viewport's height).
pub const HEIGHT: u16 = 17;
/// Sites listed in each table.
const ROWS: usize = 5;

/// Draws `s` into `area`; `ended` says the program has finished (the view stays until `q`).
pub fn draw(frame: &mut Frame, area: Rect, s: &LiveState, note: &str) {
    let block = Block::default().borders(Borders::TOP).title(Span::styled(
        format!(
            " memprof live · {} · {} · pid {} · {:.0} s{} ",
            s.script,
            s.device,
            s.pid,
            s.seconds,
            s.step
                .as_ref()
                .map(|step| format!(" · {} {}", step, s.steps))
                .unwrap_or_default()
        ),
        Style::default().add_modifier(Modifier::BOLD),
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(3),
        Constraint::Length(1 + ROWS as u16),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .split(inner);
    let b = units::bytes;
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::raw("allocated "),
            Span::styled(
                b(s.allocated_bytes),
                Style::default().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(" (peak {})", b(s.peak_allocated_bytes))),
            Span::raw(format!(" · reserved {}", b(s.reserved_bytes))),
        ])),
        rows[0],
    );
    let history: Vec<u64> = s.history.iter().map(|v| (*v).max(0) as u64).collect();
    let width = rows[1].width as usize;
    let shown = &history[history.len().saturating_sub(width)..];
    frame.render_widget(
        Sparkline::default()
            .data(shown)
            .max(s.peak_allocated_bytes.max(1) as u64)
            .style(Style::default().fg(Color::Blue)),
        rows[1],
    );
    let mut top = vec![Line::from(Span::styled(
        "live now, by site",
        Style::default().add_modifier(Modifier::DIM),
    ))];
    top.extend(s.top_sites.iter().take(ROWS).map(|site| {
        Line::from(format!(
            "{:>12}  {}  {}",
            b(site.bytes),
            site.label,
            site.source
        ))
    }));
    frame.render_widget(Paragraph::new(top), rows[2]);
    let mut growing = vec![Line::from(Span::styled(
        if s.growing.is_empty() {
            "growing: nothing".to_string()
        } else {
            format!("growing at each {}", s.step.as_deref().unwrap_or("step"))
        },
        Style::default().add_modifier(Modifier::DIM),
    ))];
    growing.extend(s.growing.iter().take(ROWS).map(|g| {
        Line::from(Span::styled(
            format!(
                "{:>12}  {} steps  {}  {}",
                units::signed_bytes(g.bytes_per_step),
                g.steps,
                g.label,
                g.source
            ),
            Style::default().fg(Color::Red),
        ))
    }));
    frame.render_widget(Paragraph::new(growing), rows[3]);
    frame.render_widget(
        Paragraph::new(Span::styled(
            note.to_string(),
            Style::default().add_modifier(Modifier::DIM),
        )),
        rows[4],
    );
}
