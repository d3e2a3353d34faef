//! `memprof diff BASE NEW`: what changed between two runs' reports. Functions match by qualified
//! name, lines by their source text (aligned as `diff` aligns files, so an edit that shifts line
//! numbers still matches; inserted and removed lines show as such), module rows by root, name
//! and phase. `--max-increase KEY=SIZE|PERCENT` fails CI (`exit_code::INCREASE_EXCEEDED`).
use crate::analysis::budgets::DELTA;
use crate::cli::Format;
use crate::error::{Error, Result};
use crate::model::profile::{FunctionProfile, LineProfile, Profile};
use crate::model::units;
use crate::render::fit::key_header;
use crate::render::table::{styled, write, write_fitted};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

pub const DIFF_SCHEMA: &str = "memprof.diff/1";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Diff {
    pub schema: String,
    pub base: String,
    pub new: String,
    /// The keys compared: `delta` and the stats both reports measured.
    pub compared: Vec<String>,
    /// Those of them that count bytes (the others count allocations, retries, ...).
    pub byte_keys: Vec<String>,
    /// Those of them that are summed over a line's hits (`delta` and the like); the others are
    /// levels or peaks.
    #[serde(default)]
    pub summed_keys: Vec<String>,
    /// What could not be compared (other devices, stats only one report has).
    pub notes: Vec<String>,
    pub functions: Vec<FunctionDiff>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<ModuleDiff>,
    /// The largest increase of any compared byte count of any function (its net Δ per call, or
    /// the highest level or peak over its lines).
    pub largest_increase: Option<Increase>,
    /// `--max-increase`: each limit and the lines that went beyond it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitResult>,
}

/// One number in both reports.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Change {
    pub base: Option<i64>,
    pub new: Option<i64>,
    /// new − base, when both exist (an added or removed line counts the other side as 0).
    pub change: Option<i64>,
}

impl Change {
    fn of(base: Option<i64>, new: Option<i64>, missing_is_zero: bool) -> Change {
        let (b, n) = if missing_is_zero {
            (base.or(Some(0)), new.or(Some(0)))
        } else {
            (base, new)
        };
        Change {
            base,
            new,
            change: b.zip(n).map(|(b, n)| n - b),
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct FunctionDiff {
    pub qualname: String,
    /// `both`, `added` (only in NEW) or `removed` (only in BASE).
    pub status: String,
    pub calls: Change,
    pub peak_allocated_bytes: Change,
    pub lines: Vec<LineDiff>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LineDiff {
    /// `same` (the source text matched), `added` or `removed`.
    pub status: String,
    pub base_line: Option<u32>,
    pub new_line: Option<u32>,
    pub source: String,
    pub delta_bytes: Change,
    pub stats: BTreeMap<String, Change>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ModuleDiff {
    pub root: String,
    pub module: String,
    pub phase: String,
    pub peak_bytes: Change,
    pub peak_increase_bytes: Change,
    pub saved_bytes: Change,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Increase {
    pub function: String,
    /// The line, for an increase of one line; None for a function's (`source` says what).
    pub line: Option<u32>,
    pub source: String,
    pub key: String,
    pub base: i64,
    pub new: i64,
    pub change: i64,
}

/// `--max-increase KEY=SIZE|PERCENT`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct LimitResult {
    pub spec: String,
    pub key: String,
    /// Bytes (or a count), or a percentage of the base value.
    pub bytes: Option<i64>,
    pub percent: Option<f64>,
    pub exceeded: Vec<Increase>,
}

/// The pairs of indices of `a` and `b` whose items match, in order (a longest common
/// subsequence, as `diff` aligns lines).
fn align(a: &[&str], b: &[&str]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let mut len = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            len[i][j] = if a[i] == b[j] {
                len[i + 1][j + 1] + 1
            } else {
                len[i + 1][j].max(len[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i] == b[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if len[i + 1][j] >= len[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

fn value(line: &LineProfile, key: &str) -> Option<i64> {
    if key == DELTA {
        line.delta_bytes
    } else {
        line.stats.get(key).copied()
    }
}

/// The compared keys, and which of them are amounts (Δ, counters summed over hits): a line only
/// one run has counts 0 of an amount in the other, while a level (a peak, a current value) has no
/// counterpart there.
struct Keys {
    all: Vec<String>,
    amounts: Vec<String>,
}

fn line_diff(
    status: &str,
    base: Option<&LineProfile>,
    new: Option<&LineProfile>,
    keys: &Keys,
) -> LineDiff {
    let one_sided = base.is_none() || new.is_none();
    let change = |key: &str| {
        Change::of(
            base.and_then(|l| value(l, key)),
            new.and_then(|l| value(l, key)),
            one_sided && keys.amounts.iter().any(|k| k == key),
        )
    };
    LineDiff {
        status: status.to_string(),
        base_line: base.map(|l| l.line),
        new_line: new.map(|l| l.line),
        source: new.or(base).map(|l| l.source.clone()).unwrap_or_default(),
        delta_bytes: change(DELTA),
        stats: keys
            .all
            .iter()
            .filter(|k| *k != DELTA)
            .map(|k| (k.clone(), change(k)))
            .collect(),
    }
}

fn function_diff(
    base: Option<&FunctionProfile>,
    new: Option<&FunctionProfile>,
    keys: &Keys,
) -> FunctionDiff {
    let empty = Vec::new();
    let (bl, nl) = (
        base.map_or(&empty, |f| &f.lines),
        new.map_or(&empty, |f| &f.lines),
    );
    let text = |lines: &Vec<LineProfile>| -> Vec<String> {
        lines.iter().map(|l| l.source.trim().to_string()).collect()
    };
    let (bt, nt) = (text(bl), text(nl));
    let pairs = align(
        &bt.iter().map(String::as_str).collect::<Vec<_>>(),
        &nt.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let mut lines = Vec::new();
    let (mut i, mut j) = (0, 0);
    for (pi, pj) in pairs.into_iter().chain([(bl.len(), nl.len())]) {
        while i < pi {
            lines.push(line_diff("removed", Some(&bl[i]), None, keys));
            i += 1;
        }
        while j < pj {
            lines.push(line_diff("added", None, Some(&nl[j]), keys));
            j += 1;
        }
        if pi < bl.len() && pj < nl.len() {
            lines.push(line_diff("same", Some(&bl[pi]), Some(&nl[pj]), keys));
            i += 1;
            j += 1;
        }
    }
    let f = new.or(base).expect("a function is in one report at least");
    FunctionDiff {
        qualname: f.qualname.clone(),
        status: match (base, new) {
            (Some(_), Some(_)) => "both",
            (None, _) => "added",
            _ => "removed",
        }
        .to_string(),
        calls: Change::of(
            base.map(|f| f.calls as i64),
            new.map(|f| f.calls as i64),
            false,
        ),
        peak_allocated_bytes: Change::of(
            base.and_then(|f| f.peak_allocated_bytes),
            new.and_then(|f| f.peak_allocated_bytes),
            false,
        ),
        lines,
    }
}

/// Compares two reports.
pub fn diff(base: &Profile, new: &Profile, base_name: &str, new_name: &str) -> Diff {
    let mut notes = Vec::new();
    let (bd, nd) = (
        base.metadata.device.describe(),
        new.metadata.device.describe(),
    );
    if bd != nd {
        notes.push(format!(
            "the runs measured different devices ({bd} and {nd}): their numbers are compared as they are"
        ));
    }
    let bkeys: Vec<&str> = base.metadata.stats.iter().map(|s| s.key.as_str()).collect();
    let mut keys = vec![DELTA.to_string()];
    for s in &new.metadata.stats {
        if bkeys.contains(&s.key.as_str()) {
            keys.push(s.key.clone());
        }
    }
    let only: Vec<&str> = base
        .metadata
        .stats
        .iter()
        .chain(&new.metadata.stats)
        .map(|s| s.key.as_str())
        .filter(|k| !keys.iter().any(|c| c == k))
        .collect();
    if !only.is_empty() {
        notes.push(format!(
            "compared where the reports overlap; measured by one report only: {}",
            only.join(", ")
        ));
    }
    let mut names: Vec<&str> = Vec::new();
    for f in base.functions.iter().chain(&new.functions) {
        if !names.contains(&f.qualname.as_str()) {
            names.push(&f.qualname);
        }
    }
    let compared = Keys {
        amounts: keys
            .iter()
            .filter(|k| {
                *k == DELTA
                    || new
                        .metadata
                        .stats
                        .iter()
                        .any(|s| &s.key == *k && s.aggregation == "sum")
            })
            .cloned()
            .collect(),
        all: keys.clone(),
    };
    let functions: Vec<FunctionDiff> = names
        .iter()
        .map(|q| function_diff(find(base, q), find(new, q), &compared))
        .collect();
    let entries = |p: &Profile| {
        p.modules
            .as_ref()
            .map(|m| m.modules.clone())
            .unwrap_or_default()
    };
    let (bm, nm) = (entries(base), entries(new));
    let modules = nm
        .iter()
        .map(|n| {
            let b = bm
                .iter()
                .find(|b| b.root == n.root && b.module == n.module && b.phase == n.phase);
            ModuleDiff {
                root: n.root.clone(),
                module: n.module.clone(),
                phase: n.phase.clone(),
                peak_bytes: Change::of(b.and_then(|b| b.peak_bytes), n.peak_bytes, false),
                peak_increase_bytes: Change::of(
                    b.and_then(|b| b.peak_increase_bytes),
                    n.peak_increase_bytes,
                    false,
                ),
                saved_bytes: Change::of(b.and_then(|b| b.saved_bytes), n.saved_bytes, false),
            }
        })
        .collect();
    let byte_keys: Vec<String> = keys
        .iter()
        .filter(|k| {
            *k == DELTA
                || new
                    .metadata
                    .stats
                    .iter()
                    .any(|s| &s.key == *k && s.is_bytes)
        })
        .cloned()
        .collect();
    // The first of the largest (the first function, then Δ before the stats).
    let largest_increase = increases(&functions, &byte_keys, &compared.amounts)
        .into_iter()
        .filter(|i| i.change > 0)
        .fold(None, |best: Option<Increase>, i| match best {
            Some(b) if b.change >= i.change => Some(b),
            _ => Some(i),
        });
    Diff {
        schema: DIFF_SCHEMA.to_string(),
        base: base_name.to_string(),
        new: new_name.to_string(),
        compared: keys,
        byte_keys,
        summed_keys: compared.amounts.clone(),
        notes,
        functions,
        modules,
        largest_increase,
        limits: Vec::new(),
    }
}

fn find<'a>(p: &'a Profile, qualname: &str) -> Option<&'a FunctionProfile> {
    p.functions.iter().find(|f| f.qualname == qualname)
}

/// Whether `key` is summed over a line's hits (Δ and the like), not a level or a peak.
fn is_summed(key: &str, summed: &[String]) -> bool {
    key == DELTA || summed.iter().any(|s| s == key)
}

/// Each function's change of each of `keys`, as a user means "more memory": for `delta` (and
/// other sums) the function's net per call (its lines' totals over its calls, so the number of
/// steps does not matter); for a level or a peak, the highest value any of its lines reached.
/// A line that was removed or added is not an increase by itself: removing `del a` lowers
/// what a line frees, but not what the function holds or peaks at.
fn increases(functions: &[FunctionDiff], keys: &[String], summed: &[String]) -> Vec<Increase> {
    let mut out = Vec::new();
    for f in functions {
        for key in keys {
            let change_of = |l: &LineDiff| {
                if key == DELTA {
                    l.delta_bytes
                } else {
                    l.stats.get(key).copied().unwrap_or_default()
                }
            };
            let is_sum = is_summed(key, summed);
            let side = |pick: fn(&Change) -> Option<i64>, calls: Option<i64>| -> Option<i64> {
                let values = f.lines.iter().filter_map(|l| pick(&change_of(l)));
                if is_sum {
                    let calls = calls.filter(|c| *c > 0)?;
                    Some(values.sum::<i64>() / calls)
                } else {
                    values.max()
                }
            };
            let (Some(base), Some(new)) =
                (side(|c| c.base, f.calls.base), side(|c| c.new, f.calls.new))
            else {
                continue;
            };
            out.push(Increase {
                function: f.qualname.clone(),
                line: None,
                source: if is_sum {
                    "net per call".into()
                } else {
                    "highest over its lines".into()
                },
                key: key.clone(),
                base,
                new,
                change: new - base,
            });
        }
    }
    out
}

/// Parses `--max-increase` expressions (`KEY=SIZE` or `KEY=PERCENT%`) against the compared keys
/// and checks the diff's lines; true when some line went beyond a limit.
pub fn check_limits(d: &mut Diff, specs: &[String]) -> Result<bool> {
    let mut any = false;
    for spec in specs {
        let bad = |why: String| {
            Error::usage(format!("'--max-increase {spec}': {why}")).hint(
                "write --max-increase KEY=SIZE or KEY=PERCENT%, e.g. allocated_bytes.all.peak=64MiB \
                 or delta=5%; KEY is `delta` or a stat both reports measured",
            )
        };
        let (key, limit) = spec
            .rsplit_once('=')
            .ok_or_else(|| bad("no '=' between the key and the limit".into()))?;
        let key = key.trim().to_string();
        if !d.compared.contains(&key) {
            return Err(bad(format!(
                "'{key}' is not compared (the reports have: {})",
                d.compared.join(", ")
            )));
        }
        let limit = limit.trim();
        let (bytes, percent) = match limit.strip_suffix('%') {
            Some(p) => (
                None,
                Some(
                    p.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|p| *p >= 0.0)
                        .ok_or_else(|| bad(format!("'{limit}' is not a percentage")))?,
                ),
            ),
            None => (
                Some(
                    units::parse_size(limit)
                        .ok_or_else(|| bad(format!("'{limit}' is not a size")))?,
                ),
                None,
            ),
        };
        let exceeded: Vec<Increase> =
            increases(&d.functions, std::slice::from_ref(&key), &d.summed_keys)
                .into_iter()
                .filter(|i| match (bytes, percent) {
                    (Some(b), _) => i.change > b,
                    (_, Some(p)) => {
                        i.change > 0 && (i.base <= 0 || i.change as f64 * 100.0 > p * i.base as f64)
                    }
                    _ => false,
                })
                .collect();
        any |= !exceeded.is_empty();
        d.limits.push(LimitResult {
            spec: spec.clone(),
            key,
            bytes,
            percent,
            exceeded,
        });
    }
    Ok(any)
}

/// Reads both reports and compares them.
pub fn diff_files(base: &Path, new: &Path) -> Result<Diff> {
    let (b, n) = (crate::render::load(base)?, crate::render::load(new)?);
    Ok(diff(
        &b,
        &n,
        &base.display().to_string(),
        &new.display().to_string(),
    ))
}

fn signed(v: i64, bytes: bool) -> String {
    if bytes {
        units::signed_bytes(v)
    } else if v > 0 {
        format!("+{v}")
    } else {
        v.to_string()
    }
}

fn plain(v: i64, bytes: bool) -> String {
    if bytes {
        units::bytes(v)
    } else {
        v.to_string()
    }
}

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
        plain(i.base, bytes),
        plain(i.new, bytes),
        signed(i.change, bytes)
    )
}

/// The diff in `format`.
pub fn render(d: &Diff, format: Format) -> String {
    crate::render::render_with(d, format, |d| table(d, None))
}

/// The diff as printed: a table fitted to the terminal, when standard output is one.
pub fn render_printed(d: &Diff, format: Format) -> String {
    crate::render::render_with(d, format, |d| table(d, crate::output::terminal::width()))
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
                                signed(v, b)
                            } else {
                                plain(v, b)
                            }
                        })
                        .unwrap_or_default(),
                );
                row.push(
                    c.change
                        .filter(|_| c.base.is_some() || c.new.is_some())
                        .map(|v| signed(v, b))
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
            let name = if m.module.is_empty() {
                format!("{} (root)", m.root)
            } else {
                m.module.clone()
            };
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
    if !d.limits.is_empty() {
        out.push('\n');
    }
    for l in &d.limits {
        let limit = match (l.bytes, l.percent) {
            (Some(b), _) => units::bytes(b),
            (_, Some(p)) => format!("{p}%"),
            _ => String::new(),
        };
        let what = if is_summed(&l.key, &d.summed_keys) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_align_across_an_insertion_and_a_removal() {
        let a = ["def f():", "a = 1", "b = 2", "return b"];
        let b = ["def f():", "a = 1", "x = 0", "b = 2", "return b"];
        assert_eq!(align(&a, &b), vec![(0, 0), (1, 1), (2, 3), (3, 4)]);
        let c = ["def f():", "b = 2", "return b"];
        assert_eq!(align(&a, &c), vec![(0, 0), (2, 1), (3, 2)]);
    }

    #[test]
    fn a_one_sided_line_counts_the_other_side_as_zero() {
        assert_eq!(Change::of(None, Some(5), true).change, Some(5));
        assert_eq!(Change::of(None, Some(5), false).change, None);
        assert_eq!(Change::of(Some(7), Some(5), false).change, Some(-2));
    }
}
