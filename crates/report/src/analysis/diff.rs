//! `memprof diff BASE NEW`: what changed between two runs' reports. Functions match by qualified
//! name, lines by their source text (aligned as `diff` aligns files, so an edit that shifts line
//! numbers still matches; inserted and removed lines show as such), module rows by root, name
//! and phase. `--max-increase KEY=SIZE|PERCENT` fails CI (`exit_code::INCREASE_EXCEEDED`).
use super::limits::{self, Amount, Forms};
use crate::error::{Error, Result};
use crate::model::diff::*;
use crate::model::profile::{FunctionProfile, LineProfile, Profile, StatColumn, DELTA};

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
            base.and_then(|l| l.value(key)),
            new.and_then(|l| l.value(key)),
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
    // Δ, and the compared stats of the new report that are `of_kind`.
    let delta_and = |of_kind: fn(&StatColumn) -> bool| -> Vec<String> {
        keys.iter()
            .filter(|k| {
                *k == DELTA
                    || new
                        .metadata
                        .stats
                        .iter()
                        .any(|s| &s.key == *k && of_kind(s))
            })
            .cloned()
            .collect()
    };
    let compared = Keys {
        amounts: delta_and(|s| s.aggregation == "sum"),
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
    let byte_keys = delta_and(|s| s.is_bytes);
    // The first of the largest (the first function, then Δ before the stats), among the
    // allocator's byte counts: the process's RSS (host_*) moves with everything else the
    // process maps, and headlines only when none of the allocator's grew.
    let largest = |keys: Vec<String>| {
        increases(&functions, &keys, &compared.amounts)
            .into_iter()
            .filter(|i| i.change > 0)
            .fold(None, |best: Option<Increase>, i| match best {
                Some(b) if b.change >= i.change => Some(b),
                _ => Some(i),
            })
    };
    let (host, allocator): (Vec<String>, Vec<String>) = byte_keys
        .iter()
        .cloned()
        .partition(|k| k.starts_with("host_"));
    let largest_increase = largest(allocator).or_else(|| largest(host));
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
        peak: super::peaks::diff(
            base.peak.as_ref(),
            new.peak.as_ref(),
            (
                base.metadata.script.as_deref(),
                new.metadata.script.as_deref(),
            ),
        ),
        largest_increase,
        limits: Vec::new(),
    }
}

fn find<'a>(p: &'a Profile, qualname: &str) -> Option<&'a FunctionProfile> {
    p.functions.iter().find(|f| f.qualname == qualname)
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
/// and checks the diff's functions (`increases`: net per call, or highest over the lines); true
/// when some function went beyond a limit.
pub fn check_limits(d: &mut Diff, specs: &[String]) -> Result<bool> {
    let mut any = false;
    for spec in specs {
        let bad = |why: String| {
            Error::usage(format!("'--max-increase {spec}': {why}")).hint(
                "write --max-increase KEY=SIZE or KEY=PERCENT%, e.g. allocated_bytes.all.peak=64MiB \
                 or delta=5%; KEY is `delta` or a stat both reports measured",
            )
        };
        let limit = limits::parse(
            spec,
            Forms {
                scoped: false,
                percent: true,
            },
        )
        .map_err(bad)?;
        let key = limit.key;
        if !d.compared.contains(&key) {
            return Err(bad(format!(
                "'{key}' is not compared (the reports have: {})",
                d.compared.join(", ")
            )));
        }
        let (bytes, percent) = match limit.amount {
            Amount::Size(b) => (Some(b), None),
            Amount::Percent(p) => (None, Some(p)),
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
}
