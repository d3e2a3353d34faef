//! The table: one block per function in line_profiler's shape (a header naming the file, the
//! function, the device and the function's peak; then Line #, Hits, Δ, the stats, Line Contents).
use super::fit::{contents_column, cut, cut_table, two_lines, wrap, Fit, MIN_SOURCE};

/// The source text is never cut shorter than this, even when the numbers alone are too wide.
const NARROWEST_SOURCE: usize = 12;
use crate::model::profile::{BudgetResult, FunctionProfile, Profile, StatColumn};
use crate::model::units;
use comfy_table::{CellAlignment, ContentArrangement, Table};
use std::fmt::Write;

/// Only the rule under the header, made of '=' as line_profiler draws it.
const PRESET: &str = "     ==            ";

/// A table in line_profiler's style (no borders, a rule of '=' under the header), for every
/// section of the report.
pub(crate) fn styled<S: ToString>(header: &[S]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(PRESET)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    table
}

/// `write`, fitted to `width` columns when given (a terminal): the source text is cut at the
/// edge (`fit::cut_table`).
pub(crate) fn write_fitted(
    out: &mut String,
    table: Table,
    right: std::ops::Range<usize>,
    width: Option<usize>,
) {
    match width {
        None => write(out, table, right),
        Some(width) => {
            let mut whole = String::new();
            write(&mut whole, table, right);
            out.push_str(&cut_table(&whole, width));
        }
    }
}

/// The column at which the last column (Line Contents) starts in `table`'s header.
fn start_of_contents(table: &Table) -> usize {
    let mut out = String::new();
    write(&mut out, table.clone(), 0..0);
    contents_column(&out).unwrap_or(0)
}

/// Writes `table` with the columns in `right` right-aligned, without trailing spaces.
pub(crate) fn write(out: &mut String, mut table: Table, right: std::ops::Range<usize>) {
    for i in right {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    for line in table.lines() {
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The report's table at full width (files, pipes, snapshots).
pub fn render(p: &Profile) -> String {
    render_fitted(p, None)
}

/// The report's table, fitted to a terminal when `fit` says how wide it is: two-line headers,
/// the source text cut last, and (for default columns) the last stat columns left out when
/// nothing else makes room.
pub fn render_fitted(p: &Profile, fit: Option<Fit>) -> String {
    let mut out = String::new();
    let m = &p.metadata;
    let _ = writeln!(
        out,
        "memprof {} · torch {} · Python {} · device {}{}",
        m.memprof_version,
        m.torch_version,
        m.python_version,
        m.device.describe(),
        rank_label(p)
            .map(|r| format!(" · {r} on {}", m.process.host))
            .unwrap_or_default()
    );
    if let Some(schedule) = &m.schedule {
        let _ = writeln!(
            out,
            "schedule: --warmup {}{}{}",
            schedule.warmup,
            schedule
                .calls
                .map(|c| format!(" --calls {c}"))
                .unwrap_or_default(),
            if schedule.stopped_early {
                " · every target had its calls, and memprof stopped its hooks"
            } else {
                ""
            }
        );
    }
    if m.collectives.is_some() {
        let _ = writeln!(
            out,
            "collectives: bytes of the torch.distributed collectives started during each line \
             (the full buffer of each; NCCL's own buffers are not included)"
        );
    }
    if let Some(reason) = &m.peak_resets {
        let _ = writeln!(out, "note: {reason}");
    }
    if let Some(h) = &p.history {
        let dropped = match h.dropped {
            Some(n) if n > 0 => format!(", {n} older ones dropped (--history-max-entries)"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "history: {} allocator events written to {}{dropped}; open it at \
             https://pytorch.org/memory_viz",
            h.events, h.file
        );
    }
    for f in &p.functions {
        out.push('\n');
        render_function(&mut out, p, f, fit);
    }
    if p.functions.is_empty() && p.modules.is_none() && p.oom.is_none() {
        let _ = writeln!(out, "\nno targeted function ran");
    }
    if let Some(inventories) = &p.tensors {
        super::tensors::render(&mut out, inventories);
    }
    if let Some(modules) = &p.modules {
        super::modules::render(&mut out, modules);
    }
    if let Some(budgets) = &p.budgets {
        render_budgets(&mut out, budgets, &m.stats);
    }
    if let Some(oom) = &p.oom {
        super::oom::render(&mut out, oom);
    }
    for w in &p.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    match m.outcome.status.as_str() {
        "exception" => {
            let _ = writeln!(
                out,
                "the script raised {}",
                m.outcome.exception.as_deref().unwrap_or("an exception")
            );
        }
        "interrupted" | "terminated" => {
            let _ = writeln!(
                out,
                "the script was {}: this report covers what ran until then",
                m.outcome.status
            );
        }
        _ => {}
    }
    match fit {
        // The header lines and warnings too: on a terminal no text runs past the edge.
        Some(fit) => out
            .lines()
            .flat_map(|l| {
                // Text lines only: a table's rows (a leading space, the '=' rule) are fitted
                // already, and keep their columns when a very narrow terminal cannot hold them.
                let text = !l.starts_with(' ') && !l.starts_with('=');
                if text && l.chars().count() > fit.width {
                    wrap(l, fit.width)
                } else {
                    vec![l.to_string()]
                }
            })
            .map(|l| l + "\n")
            .collect(),
        None => out,
    }
}

/// `rank 1 of 2` for a report of a multi-rank run.
fn rank_label(p: &Profile) -> Option<String> {
    let r = &p.metadata.process;
    (r.world_size > 1).then(|| format!("rank {} of {}", r.rank, r.world_size))
}

fn render_function(out: &mut String, p: &Profile, f: &FunctionProfile, fit: Option<Fit>) {
    let m = &p.metadata;
    let _ = writeln!(out, "File: {}", f.file);
    let _ = writeln!(out, "Function: {} at line {}", f.qualname, f.first_line);
    let peak = f
        .peak_allocated_bytes
        .map(units::bytes)
        .unwrap_or_else(|| "-".into());
    let device = m.device.describe();
    let rank = rank_label(p).map(|r| format!(" · {r}")).unwrap_or_default();
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
    let kinds = super::modules::kinds_in(f.lines.iter().map(|l| &l.collectives));
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

/// The `--max` budgets: which held, and the lines that broke the others.
fn render_budgets(out: &mut String, budgets: &[BudgetResult], stats: &[StatColumn]) {
    let _ = writeln!(out, "\nBudgets (--max):");
    for b in budgets {
        let bytes = crate::analysis::budgets::is_delta(&b.key)
            || stats.iter().any(|s| s.key == b.key && s.is_bytes);
        let show = |v: i64| {
            if bytes {
                units::bytes(v)
            } else {
                v.to_string()
            }
        };
        let limit = show(b.limit);
        if b.lines_checked == Some(0) {
            let whose = match &b.function {
                Some(f) => format!("no measured function is named '{f}'"),
                None => "no targeted function was measured".to_string(),
            };
            let _ = writeln!(
                out,
                "  UNCHECKED {}: {whose}, so it checked nothing",
                b.spec
            );
            continue;
        }
        if b.exceeded.is_empty() {
            let checked = b
                .lines_checked
                .map(|n| format!(", {n} lines checked"))
                .unwrap_or_default();
            let _ = writeln!(out, "  held      {} (≤ {limit}{checked})", b.spec);
            continue;
        }
        let _ = writeln!(out, "  EXCEEDED  {} (≤ {limit}):", b.spec);
        for e in &b.exceeded {
            let value = show(e.value);
            let _ = writeln!(
                out,
                "            {} line {}: {} = {value}   {}",
                e.function, e.line, b.key, e.source
            );
        }
    }
}
