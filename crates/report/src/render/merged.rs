//! A merged report as a table: the summary (merged_summary.rs), then per function line each
//! stat's max (and its rank), min and imbalance; the module rows likewise.
use super::fit::key_header;
use super::merged_summary as summary;
pub use super::merged_summary::RankDetail;
use super::style::{bytes_or_count, signed_bytes_or_count, styled, write, write_fitted};
use super::Format;
use crate::model::merged::*;
use crate::model::profile::{collective_kinds_in, module_label};
use crate::model::units;
use std::fmt::Write;

/// The merged report in `format`; a table fitted to `terminal_width` when given, with the
/// per-rank detail of `detail`.
pub fn render(
    m: &Merged,
    format: Format,
    terminal_width: Option<usize>,
    detail: &RankDetail,
) -> String {
    super::render_with(m, format, |m| table(m, terminal_width, detail))
}

/// `1.13 GiB (r1)`: the max and the rank holding it.
fn max_cell(s: &Spread, bytes: bool) -> String {
    format!("{} (r{})", bytes_or_count(s.max, bytes), s.max_rank)
}

/// A value of the merged report; a signed one (a Δ, in bytes) with its sign.
fn value(v: i64, bytes: bool, signed: bool) -> String {
    if signed && bytes {
        signed_bytes_or_count(v, bytes)
    } else {
        bytes_or_count(v, bytes)
    }
}

/// The three cells of one number: max (rank), min, imbalance.
fn cells(s: Option<&Spread>, bytes: bool, signed: bool) -> [String; 3] {
    match s {
        Some(s) => [
            if signed && bytes {
                format!("{} (r{})", units::signed_bytes(s.max), s.max_rank)
            } else {
                max_cell(s, bytes)
            },
            value(s.min, bytes, signed),
            value(s.imbalance, bytes, false),
        ],
        None => Default::default(),
    }
}

/// Headers of the three cells of `name` (two lines each: the name, then the part).
fn headers(name: &str) -> [String; 3] {
    [
        format!("{name}\nmax (rank)"),
        "\nmin".to_string(),
        "\nmax − min".to_string(),
    ]
}

/// `headers` of a stat key, over two lines on a terminal (`allocated_bytes` over `all.peak`).
fn key_headers(key: &str, width: Option<usize>) -> [String; 3] {
    let name = key_header(key, width);
    let above = "\n".repeat(name.lines().count());
    [
        format!("{name}\nmax (rank)"),
        format!("{above}min"),
        format!("{above}max − min"),
    ]
}

fn table(m: &Merged, width: Option<usize>, detail: &RankDetail) -> String {
    let mut out = String::new();
    let md = &m.metadata;
    summary::header(&mut out, m);
    summary::peak(&mut out, m, detail);
    if !m.functions.is_empty() {
        let _ = writeln!(
            out,
            "\nPer line: max over ranks (the rank holding it), min, and the imbalance max − min"
        );
    }
    for f in &m.functions {
        out.push('\n');
        let _ = writeln!(out, "File: {}", f.file);
        let _ = writeln!(out, "Function: {} at line {}", f.qualname, f.first_line);
        let peak = f
            .peak_allocated_bytes
            .map(|p| {
                format!(
                    "{} on rank {}, {} min, imbalance {}",
                    units::bytes(p.max),
                    p.max_rank,
                    units::bytes(p.min),
                    units::bytes(p.imbalance)
                )
            })
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "Calls: {} · Peak allocated_bytes.all.peak: {peak}",
            if f.calls.imbalance == 0 {
                f.calls.max.to_string()
            } else {
                format!("{}–{}", f.calls.min, f.calls.max)
            }
        );
        out.push('\n');
        let kinds = collective_kinds_in(f.lines.iter().map(|l| &l.collectives));
        let mut header = vec!["Line #".to_string(), "Hits".to_string()];
        header.extend(headers("Δ allocated"));
        for s in &md.stats {
            header.extend(key_headers(&s.key, width));
        }
        for k in &kinds {
            header.extend(headers(k));
        }
        header.push("Line Contents".into());
        let mut t = styled(&header);
        for l in &f.lines {
            let mut row = vec![l.line.to_string()];
            row.push(match (&l.hits, l.ranks) {
                (Some(h), Some(ranks)) => format!("{} ({ranks} ranks)", h.max),
                (Some(h), None) => h.max.to_string(),
                (None, _) => String::new(),
            });
            row.extend(cells(l.delta_bytes.as_ref(), true, true));
            for s in &md.stats {
                row.extend(cells(l.stats.get(&s.key), s.is_bytes, false));
            }
            for k in &kinds {
                row.extend(cells(l.collectives.get(k), true, false));
            }
            row.push(l.source.clone());
            t.add_row(row);
        }
        let columns = header.len() - 1;
        write_fitted(&mut out, t, 0..columns, width);
    }
    if !m.modules.is_empty() {
        modules_table(&mut out, &m.modules);
    }
    for w in &m.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

fn modules_table(out: &mut String, modules: &[MergedModule]) {
    let _ = writeln!(
        out,
        "\nModules · max over ranks (the rank holding it), min, max − min; peaks the highest of any call"
    );
    out.push('\n');
    let kinds = collective_kinds_in(modules.iter().map(|e| &e.collectives));
    let mut header = vec!["Module".to_string(), "Phase".to_string()];
    header.extend(headers("Peak +"));
    header.extend(headers("Saved"));
    header.extend(headers("Params"));
    for k in &kinds {
        header.extend(headers(k));
    }
    let mut t = styled(&header);
    for e in modules {
        let indent = "  ".repeat(e.depth as usize);
        let name = module_label(&e.root, &e.module);
        let mut row = vec![format!("{indent}{name}"), e.phase.clone()];
        row.extend(cells(e.peak_increase_bytes.as_ref(), true, false));
        row.extend(cells(e.saved_bytes.as_ref(), true, false));
        row.extend(cells(Some(&e.parameter_bytes), true, false));
        for k in &kinds {
            row.extend(cells(e.collectives.get(k), true, false));
        }
        t.add_row(row);
    }
    let columns = header.len();
    write(out, t, 2..columns);
}
