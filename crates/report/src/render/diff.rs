//! A diff as a table: per function, each line's numbers in both runs and the change, the module
//! rows that changed, and the `--max-increase` limits with what went beyond them.
use super::fit::key_header;
use super::style::{bytes_or_count, signed_bytes_or_count, styled, write, write_fitted};
use super::Format;
use crate::model::diff::*;
use crate::model::profile::DELTA;
use crate::model::units;
use std::fmt::Write;

/// `allocated_bytes.all.peak 88.21 MiB → 100.21 MiB (+12.00 MiB, +13.6%)`; counts that are not
/// bytes are written as numbers.
fn describe(i: &Increase, bytes: bool) -> String {
    let pct = if i.base > 0 {
        format!(", {:+.1}%", i.change as f64 * 100.0 / i.base as f64)
    } else {
        String::new()
    };
    let place = match i.line {
        Some(line) => format!("line {line} `{}`", i.source),
        None => format!("({})", i.source),
    };
    format!(
        "{} {place}: {} {} → {} ({}{pct})",
        i.function,
        i.key,
        bytes_or_count(i.base, bytes),
        bytes_or_count(i.new, bytes),
        signed_bytes_or_count(i.change, bytes)
    )
}

/// The diff in `format`; a table fitted to `terminal_width` when given.
pub fn render(d: &Diff, format: Format, terminal_width: Option<usize>) -> String {
    super::render_with(d, format, |d| table(d, terminal_width))
}

fn table(d: &Diff, width: Option<usize>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "memprof diff · base {} · new {}", d.base, d.new);
    match &d.largest_increase {
        Some(i) => {
            let _ = writeln!(out, "largest increase: {}", describe(i, true));
        }
        None => {
            let _ = writeln!(out, "largest increase: none (no compared byte count grew)");
        }
    }
    for n in &d.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let keys: Vec<&String> = d.compared.iter().filter(|k| *k != DELTA).collect();
    let bytes_of = |k: &str| d.byte_keys.iter().any(|b| b == k);
    for f in &d.functions {
        out.push('\n');
        let peak = |c: &Change| c.new.or(c.base).map(units::bytes).unwrap_or_default();
        let _ = writeln!(
            out,
            "Function: {} ({}) · peak {} ({})",
            f.qualname,
            f.status,
            peak(&f.peak_allocated_bytes),
            f.peak_allocated_bytes
                .change
                .map(units::signed_bytes)
                .unwrap_or_else(|| "-".into())
        );
        out.push('\n');
        let mut header = vec!["Line #".to_string(), "Was".to_string()];
        let tall = if width.is_some() { "\n" } else { "" };
        header.push(format!("Δ allocated{tall}\nnew"));
        header.push(format!("{tall}\nchange"));
        for k in &keys {
            let key = key_header(k, width);
            let lines = key.lines().count();
            header.push(format!("{key}\nnew"));
            header.push(format!("{}change", "\n".repeat(lines)));
        }
        header.push("Line Contents".into());
        let mut t = styled(&header);
        for l in &f.lines {
            let mut row = vec![
                l.new_line
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into()),
                match (l.base_line, l.new_line) {
                    (Some(b), Some(n)) if b == n => String::new(),
                    (Some(b), _) => b.to_string(),
                    (None, _) => "+".into(),
                },
            ];
            for (k, c) in std::iter::once((DELTA, l.delta_bytes)).chain(
                keys.iter()
                    .map(|k| (k.as_str(), l.stats.get(*k).copied().unwrap_or_default())),
            ) {
                let b = bytes_of(k);
                row.push(
                    c.new
                        .map(|v| {
                            if k == DELTA {
                                signed_bytes_or_count(v, b)
                            } else {
                                bytes_or_count(v, b)
                            }
                        })
                        .unwrap_or_default(),
                );
                row.push(
                    c.change
                        .filter(|_| c.base.is_some() || c.new.is_some())
                        .map(|v| signed_bytes_or_count(v, b))
                        .unwrap_or_default(),
                );
            }
            let mark = match l.status.as_str() {
                "added" => "+ ",
                "removed" => "- ",
                _ => "  ",
            };
            row.push(format!("{mark}{}", l.source));
            t.add_row(row);
        }
        let columns = header.len() - 1;
        write_fitted(&mut out, t, 0..columns, width);
    }
    if !d.modules.is_empty() {
        let _ = writeln!(
            out,
            "\nModules · peak increase and saved bytes, new and change"
        );
        out.push('\n');
        let header = ["Module", "Phase", "Peak +", "change", "Saved", "change"];
        let mut t = styled(&header);
        for m in &d.modules {
            let name = crate::model::profile::module_label(&m.root, &m.module);
            let cell = |v: Option<i64>| v.map(units::bytes).unwrap_or_default();
            let change = |v: Option<i64>| v.map(units::signed_bytes).unwrap_or_default();
            t.add_row(vec![
                name,
                m.phase.clone(),
                cell(m.peak_increase_bytes.new),
                change(m.peak_increase_bytes.change),
                cell(m.saved_bytes.new),
                change(m.saved_bytes.change),
            ]);
        }
        write(&mut out, t, 2..header.len());
    }
    if let Some(peak) = &d.peak {
        peak_table(&mut out, peak);
    }
    if !d.limits.is_empty() {
        out.push('\n');
    }
    for l in &d.limits {
        let limit = match (l.bytes, l.percent) {
            (Some(b), _) => units::bytes(b),
            (_, Some(p)) => format!("{p}%"),
            _ => String::new(),
        };
        let what = if crate::model::diff::is_summed(&l.key, &d.summed_keys) {
            "each function's net per call"
        } else {
            "each function's highest value over its lines"
        };
        if l.exceeded.is_empty() {
            let _ = writeln!(
                out,
                "held      --max-increase {} (≤ {limit}; compared {what})",
                l.spec
            );
        } else {
            let _ = writeln!(out, "EXCEEDED  --max-increase {} (≤ {limit}):", l.spec);
            for i in &l.exceeded {
                let _ = writeln!(out, "          {}", describe(i, bytes_of(&i.key)));
            }
        }
    }
    out
}

/// The two peaks, then per site its bytes at each, largest change first.
fn peak_table(out: &mut String, peak: &PeakDiff) {
    let cell = |v: Option<i64>| v.map(units::bytes).unwrap_or_default();
    let change = |v: Option<i64>| v.map(units::signed_bytes).unwrap_or_default();
    let _ = writeln!(
        out,
        "\nPeak: allocated_bytes.all.peak {} → {} ({}); reserved then {} → {}",
        cell(peak.allocated_bytes.base),
        cell(peak.allocated_bytes.new),
        change(peak.allocated_bytes.change),
        cell(peak.reserved_bytes.base),
        cell(peak.reserved_bytes.new),
    );
    if let Some(d) = &peak.device_bytes {
        let _ = writeln!(
            out,
            "device at the peak (the driver's count, or the host's resident peak): {} → {} ({})",
            cell(d.base),
            cell(d.new),
            change(d.change),
        );
    }
    let mut moved: Vec<(&String, &Change)> = peak
        .categories
        .iter()
        .filter(|(_, c)| c.change.is_some_and(|x| x != 0))
        .collect();
    moved.sort_by_key(|(_, c)| std::cmp::Reverse(c.change.unwrap_or(0).abs()));
    if !moved.is_empty() {
        let parts: Vec<String> = moved
            .iter()
            .map(|(name, c)| {
                format!(
                    "{} {} → {} ({})",
                    name.replace('_', " "),
                    cell(c.base),
                    cell(c.new),
                    change(c.change)
                )
            })
            .collect();
        let _ = writeln!(out, "by category: {}", parts.join(", "));
    }
    out.push('\n');
    let header = ["Base", "New", "Change", "Site", "Line Contents"];
    let mut t = styled(&header);
    for s in &peak.sites {
        let mark = match s.status.as_str() {
            "added" => "+ ",
            "removed" => "- ",
            _ => "  ",
        };
        t.add_row(vec![
            cell(s.bytes.base),
            cell(s.bytes.new),
            change(s.bytes.change),
            s.at.label(),
            format!("{mark}{}", s.at.place.source),
        ]);
    }
    write(out, t, 0..3);
}
