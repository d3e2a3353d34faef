//! The `--max` section of the table: which budgets held, which checked nothing, and the lines
//! that broke the others.
use super::style::bytes_or_count;
use crate::model::profile::{BudgetResult, StatColumn};
use std::fmt::Write;

/// The `--max` budgets: which held, and the lines that broke the others.
pub fn render(out: &mut String, budgets: &[BudgetResult], stats: &[StatColumn]) {
    let _ = writeln!(out, "\nBudgets (--max):");
    for b in budgets {
        let bytes = crate::model::profile::is_delta(&b.key)
            || stats.iter().any(|s| s.key == b.key && s.is_bytes);
        let show = |v: i64| bytes_or_count(v, bytes);
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
