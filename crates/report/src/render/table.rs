//! A targeted function's block of the table, in line_profiler's shape: a header naming the file,
//! the function, the device and the function's peak; then Line #, Hits, Δ, the stats, Line
//! Contents.
use super::fit::{cut, two_lines, wrap, Fit, MIN_SOURCE};
use super::style::{start_of_contents, styled, write};
use crate::model::profile::{FunctionProfile, Profile, StatColumn};
use crate::model::units;
use comfy_table::Table;
use std::fmt::Write;

/// The source text is never cut shorter than this, even when the numbers alone are too wide.
const NARROWEST_SOURCE: usize = 12;

/// The lines that name a function: its file, and its name and first line.
pub fn render_heading(out: &mut String, f: &FunctionProfile) {
    let _ = writeln!(out, "File: {}", f.file);
    let _ = writeln!(out, "Function: {} at line {}", f.qualname, f.first_line);
}

pub fn render_function(out: &mut String, p: &Profile, f: &FunctionProfile, fit: Option<Fit>) {
    let m = &p.metadata;
    render_heading(out, f);
    let peak = f
        .peak_allocated_bytes
        .map(units::bytes)
        .unwrap_or_else(|| "-".into());
    let device = m.device.describe();
    // A function that ran in a child process says which; else the rank, in a multi-rank run.
    let rank = f
        .process
        .clone()
        .map(|child| format!(" · in {child}"))
        .or_else(|| p.metadata.process.label().map(|r| format!(" · {r}")))
        .unwrap_or_default();
    let measured = f
        .measured_calls
        .map(|[a, b]| format!(" (measured: {a}–{b})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Device: {device}{rank} · Calls: {}{measured} · Peak allocated_bytes.all.peak: {peak}",
        f.calls
    );
    out.push('\n');
    let any_raised = f.lines.iter().any(|l| l.raised > 0);
    // --max: the budgets each line broke.
    let over = |line: u32| -> Vec<&str> {
        p.budgets
            .iter()
            .flatten()
            .filter(|b| {
                b.exceeded
                    .iter()
                    .any(|e| e.line == line && e.function == f.qualname)
            })
            .map(|b| b.key.as_str())
            .collect()
    };
    let any_over = f.lines.iter().any(|l| !over(l.line).is_empty());
    let kinds = crate::model::profile::collective_kinds_in(f.lines.iter().map(|l| &l.collectives));
    let draw = |stats: &[&StatColumn], source_width: Option<usize>| -> Table {
        let mut header = vec![
            "Line #".to_string(),
            "Hits".to_string(),
            "Δ allocated".to_string(),
        ];
        header.extend(stats.iter().map(|s| {
            if fit.is_some() {
                two_lines(&s.key)
            } else {
                s.key.clone()
            }
        }));
        header.extend(kinds.iter().map(|k| k.to_string()));
        if any_raised {
            header.push("Raised".into());
        }
        if any_over {
            header.push("Over budget".into());
        }
        header.push("Line Contents".into());
        let mut table = styled(&header);
        for line in &f.lines {
            let ran = line.hits > 0 || line.delta_bytes.is_some();
            let mut row = vec![line.line.to_string()];
            if ran {
                row.push(line.hits.to_string());
                row.push(
                    line.delta_bytes
                        .map(units::signed_bytes)
                        .unwrap_or_default(),
                );
                for s in stats {
                    let v = line.stats.get(&s.key);
                    row.push(match v {
                        Some(&v) if s.is_bytes => units::bytes(v),
                        Some(v) => v.to_string(),
                        None => String::new(),
                    });
                }
                for k in &kinds {
                    row.push(
                        line.collectives
                            .get(k)
                            .map(|&n| units::bytes(n))
                            .unwrap_or_default(),
                    );
                }
            } else {
                row.extend(std::iter::repeat_n(
                    String::new(),
                    2 + stats.len() + kinds.len(),
                ));
            }
            if any_raised {
                row.push(if line.raised > 0 {
                    line.raised.to_string()
                } else {
                    String::new()
                });
            }
            if any_over {
                row.push(over(line.line).join(", "));
            }
            row.push(match source_width {
                Some(w) => cut(&line.source, w),
                None => line.source.clone(),
            });
            table.add_row(row);
        }
        table
    };
    let mut stats: Vec<&StatColumn> = m.stats.iter().collect();
    let mut hidden: Vec<&str> = Vec::new();
    let mut source_width = None;
    if let Some(fit) = fit {
        loop {
            // Where the source text starts: everything before it is the numbers' width.
            let before = start_of_contents(&draw(&stats, Some(0)));
            // The last column keeps one space of padding after its text.
            let room = fit.width.saturating_sub(before + 1);
            if room >= MIN_SOURCE || !fit.may_drop_stats || stats.len() <= 1 {
                source_width = Some(room.max(NARROWEST_SOURCE));
                break;
            }
            hidden.insert(0, &stats.pop().expect("more than one").key);
        }
    }
    let table = draw(&stats, source_width);
    let columns = 3 + stats.len() + kinds.len() + usize::from(any_raised);
    // (The "Over budget" column stays left-aligned, as text.)
    write(out, table, 0..columns);
    if let (Some(fit), false) = (fit, hidden.is_empty()) {
        let note = format!(
            "(left out to fit {} columns: {}; widen the terminal, choose columns with --stat, \
             or write the report with -o FILE)",
            fit.width,
            hidden.join(", ")
        );
        for line in wrap(&note, fit.width) {
            let _ = writeln!(out, "{line}");
        }
    }
}
