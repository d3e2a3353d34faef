//! `memprof merge` (and `memprof show` given several files): the reports of a job's ranks side
//! by side. Per function line and per module row, each number's max and min over the ranks, the
//! rank holding the max, and the imbalance (max − min); as a table, YAML or JSON
//! (`schema: memprof.merged/1`).
use crate::cli::Format;
use crate::error::{Error, Result};
use crate::model::profile::{ModuleEntry, Profile, StatColumn};
use crate::model::units;
use crate::render::fit::key_header;
use crate::render::table::{styled, write, write_fitted};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

pub const MERGED_SCHEMA: &str = "memprof.merged/1";

/// What a merged number means, written into the merged report.
pub const MERGED_SEMANTICS: &str = "Each number of the ranks' reports, over the ranks where it \
was measured: max and min, the rank that holds the max (the lowest rank on a tie), and \
imbalance = max - min. Lines match by function (qualified name and file name) and line number; \
module rows by root, qualified name and phase. `ranks` counts the ranks where a line ran or a \
module was called, when that is not every rank.";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Merged {
    pub schema: String,
    pub metadata: MergedMetadata,
    pub functions: Vec<MergedFunction>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<MergedModule>,
    pub warnings: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedMetadata {
    pub memprof_version: String,
    pub torch_version: String,
    pub script: Option<String>,
    pub world_size: u32,
    /// The stats of every report, in column order.
    pub stats: Vec<StatColumn>,
    pub ranks: Vec<RankReport>,
    pub semantics: String,
}

/// One rank's report.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RankReport {
    pub rank: u32,
    pub local_rank: u32,
    pub host: String,
    /// e.g. `cuda:1 (NVIDIA H200)`.
    pub device: String,
    pub file: String,
    /// `completed`, `exception`, ... as in the rank's report.
    pub outcome: String,
}

/// One number over the ranks.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    pub max: i64,
    pub min: i64,
    pub max_rank: u32,
    pub imbalance: i64,
}

impl Spread {
    /// Over (rank, value) pairs, ranks ascending; None when there are none.
    fn of(values: impl IntoIterator<Item = (u32, i64)>) -> Option<Spread> {
        let mut out: Option<Spread> = None;
        for (rank, v) in values {
            out = Some(match out {
                None => Spread {
                    max: v,
                    min: v,
                    max_rank: rank,
                    imbalance: 0,
                },
                Some(s) => {
                    let (max, max_rank) = if v > s.max {
                        (v, rank)
                    } else {
                        (s.max, s.max_rank)
                    };
                    let min = s.min.min(v);
                    Spread {
                        max,
                        min,
                        max_rank,
                        imbalance: max - min,
                    }
                }
            });
        }
        out
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedFunction {
    pub qualname: String,
    pub file: String,
    pub first_line: u32,
    pub calls: Spread,
    pub peak_allocated_bytes: Option<Spread>,
    pub lines: Vec<MergedLine>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedLine {
    pub line: u32,
    pub source: String,
    /// Ranks where the line ran, when not every rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_bytes: Option<Spread>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<String, Spread>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub collectives: BTreeMap<String, Spread>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MergedModule {
    pub root: String,
    pub module: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub depth: u32,
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
    pub calls: Spread,
    pub delta_bytes: Spread,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_increase_bytes: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_bytes: Option<Spread>,
    pub parameter_bytes: Spread,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub collectives: BTreeMap<String, Spread>,
}

/// Reads the reports and merges them.
pub fn merge_files(files: &[PathBuf]) -> Result<Merged> {
    let mut reports = Vec::with_capacity(files.len());
    for file in files {
        reports.push((file.clone(), crate::render::load(file)?));
    }
    merge(reports)
}

/// Keeps only the `--stat` columns asked for (all when none); a key the reports lack is an error.
pub fn keep_stats(m: &mut Merged, requested: &[String]) -> Result<()> {
    let keys: Vec<&str> = requested
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    for key in &keys {
        if !m.metadata.stats.iter().any(|s| s.key == *key) {
            let have: Vec<&str> = m.metadata.stats.iter().map(|s| s.key.as_str()).collect();
            return Err(Error::usage(format!(
                "the reports did not measure '{key}'; they have {}",
                have.join(", ")
            ))
            .hint("choose among those, or run the ranks again with --stat"));
        }
    }
    m.metadata.stats.retain(|s| keys.contains(&s.key.as_str()));
    for line in m.functions.iter_mut().flat_map(|f| &mut f.lines) {
        line.stats.retain(|k, _| keys.contains(&k.as_str()));
    }
    Ok(())
}

/// What two reports disagree on that makes them not ranks of one run.
fn check_compatible(reports: &[(PathBuf, Profile)]) -> Result<()> {
    let (first_file, first) = &reports[0];
    let keys =
        |p: &Profile| -> Vec<String> { p.metadata.stats.iter().map(|s| s.key.clone()).collect() };
    let hint =
        "merge the reports of one run (`memprof run ... -o 'name.{rank}.json'` under torchrun)";
    for (file, p) in &reports[1..] {
        let (a, b) = (&first.metadata.script, &p.metadata.script);
        if a != b {
            return Err(Error::usage(format!(
                "the reports are of different scripts: {} ran {}, {} ran {}",
                first_file.display(),
                a.as_deref().unwrap_or("an unknown script"),
                file.display(),
                b.as_deref().unwrap_or("an unknown script"),
            ))
            .hint(hint));
        }
        if keys(first) != keys(p) {
            return Err(Error::usage(format!(
                "the reports measured different stats: {} has {}, {} has {}",
                first_file.display(),
                keys(first).join(", "),
                file.display(),
                keys(p).join(", "),
            ))
            .hint("run every rank with the same --stat options"));
        }
    }
    let mut seen: BTreeMap<u32, &Path> = BTreeMap::new();
    for (file, p) in reports {
        let rank = p.metadata.process.rank;
        if let Some(other) = seen.insert(rank, file) {
            return Err(Error::usage(format!(
                "{} and {} are both reports of rank {rank}",
                other.display(),
                file.display()
            ))
            .hint(hint));
        }
    }
    Ok(())
}

/// Merges reports of the ranks of one run.
pub fn merge(mut reports: Vec<(PathBuf, Profile)>) -> Result<Merged> {
    if reports.is_empty() {
        return Err(Error::usage("no reports to merge").hint("pass the ranks' report files"));
    }
    check_compatible(&reports)?;
    reports.sort_by_key(|(_, p)| p.metadata.process.rank);
    let first = &reports[0].1;
    let n = reports.len() as u32;
    let ranks: Vec<RankReport> = reports
        .iter()
        .map(|(file, p)| RankReport {
            rank: p.metadata.process.rank,
            local_rank: p.metadata.process.local_rank,
            host: p.metadata.process.host.clone(),
            device: p.metadata.device.describe(),
            file: file.display().to_string(),
            outcome: p.metadata.outcome.status.clone(),
        })
        .collect();
    let mut warnings = Vec::new();
    let world = first.metadata.process.world_size;
    if world as usize != reports.len() {
        warnings.push(format!(
            "the run had {world} ranks and {} reports were given",
            reports.len()
        ));
    }
    let rank_of = |p: &Profile| p.metadata.process.rank;

    // Functions, in the first report's order, then any only other ranks ran.
    let mut keys: Vec<(String, String)> = Vec::new();
    for (_, p) in &reports {
        for f in &p.functions {
            let key = (f.qualname.clone(), file_name(&f.file));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    let mut functions = Vec::new();
    for (qualname, file) in keys {
        let found: Vec<(u32, &crate::model::profile::FunctionProfile)> = reports
            .iter()
            .filter_map(|(_, p)| {
                p.functions
                    .iter()
                    .find(|f| f.qualname == qualname && file_name(&f.file) == file)
                    .map(|f| (rank_of(p), f))
            })
            .collect();
        let mut line_numbers: Vec<u32> = found
            .iter()
            .flat_map(|(_, f)| f.lines.iter().map(|l| l.line))
            .collect();
        line_numbers.sort_unstable();
        line_numbers.dedup();
        let mut lines = Vec::new();
        for number in line_numbers {
            let per_rank: Vec<(u32, &crate::model::profile::LineProfile)> = found
                .iter()
                .filter_map(|(r, f)| f.lines.iter().find(|l| l.line == number).map(|l| (*r, l)))
                .collect();
            let ran: Vec<(u32, &crate::model::profile::LineProfile)> = per_rank
                .iter()
                .filter(|(_, l)| l.hits > 0 || l.delta_bytes.is_some())
                .copied()
                .collect();
            let source = per_rank
                .first()
                .map(|(_, l)| l.source.clone())
                .unwrap_or_default();
            let spread_of = |key: &str| {
                Spread::of(
                    ran.iter()
                        .filter_map(|(r, l)| l.stats.get(key).map(|v| (*r, *v))),
                )
            };
            let collectives = crate::render::kinds_in(ran.iter().map(|(_, l)| &l.collectives))
                .into_iter()
                .filter_map(|k| {
                    let s = Spread::of(
                        ran.iter()
                            .map(|(r, l)| (*r, l.collectives.get(&k).copied().unwrap_or(0))),
                    )?;
                    Some((k, s))
                })
                .collect();
            lines.push(MergedLine {
                line: number,
                source,
                ranks: (!ran.is_empty() && (ran.len() as u32) < n).then_some(ran.len() as u32),
                hits: Spread::of(ran.iter().map(|(r, l)| (*r, l.hits as i64))),
                delta_bytes: Spread::of(
                    ran.iter()
                        .filter_map(|(r, l)| l.delta_bytes.map(|d| (*r, d))),
                ),
                stats: first
                    .metadata
                    .stats
                    .iter()
                    .filter_map(|c| spread_of(&c.key).map(|s| (c.key.clone(), s)))
                    .collect(),
                collectives,
            });
        }
        let (_, f0) = found[0];
        functions.push(MergedFunction {
            qualname: f0.qualname.clone(),
            file: f0.file.clone(),
            first_line: f0.first_line,
            calls: Spread::of(found.iter().map(|(r, f)| (*r, f.calls as i64)))
                .expect("found in one report at least"),
            peak_allocated_bytes: Spread::of(
                found
                    .iter()
                    .filter_map(|(r, f)| f.peak_allocated_bytes.map(|p| (*r, p))),
            ),
            lines,
        });
    }

    // Module rows, in the first report's order, then those only other ranks had.
    let mut module_keys: Vec<(String, String, String)> = Vec::new();
    for (_, p) in &reports {
        for e in p.modules.iter().flat_map(|m| &m.modules) {
            let key = (e.root.clone(), e.module.clone(), e.phase.clone());
            if !module_keys.contains(&key) {
                module_keys.push(key);
            }
        }
    }
    let modules = module_keys
        .into_iter()
        .map(|(root, module, phase)| {
            let rows: Vec<(u32, &ModuleEntry)> = reports
                .iter()
                .filter_map(|(_, p)| {
                    p.modules
                        .iter()
                        .flat_map(|m| &m.modules)
                        .find(|e| e.root == root && e.module == module && e.phase == phase)
                        .map(|e| (rank_of(p), e))
                })
                .collect();
            merge_module(&rows, n)
        })
        .collect();
    Ok(Merged {
        schema: MERGED_SCHEMA.to_string(),
        metadata: MergedMetadata {
            memprof_version: first.metadata.memprof_version.clone(),
            torch_version: first.metadata.torch_version.clone(),
            script: first.metadata.script.clone(),
            world_size: world,
            stats: first.metadata.stats.clone(),
            ranks,
            semantics: MERGED_SEMANTICS.to_string(),
        },
        functions,
        modules,
        warnings,
    })
}

fn merge_module(rows: &[(u32, &ModuleEntry)], ranks: u32) -> MergedModule {
    let e0 = rows[0].1;
    let spread = |f: &dyn Fn(&ModuleEntry) -> Option<i64>| {
        Spread::of(rows.iter().filter_map(|(r, e)| f(e).map(|v| (*r, v))))
    };
    let collectives = crate::render::kinds_in(rows.iter().map(|(_, e)| &e.collectives))
        .into_iter()
        .filter_map(|k| {
            let s = spread(&|e| Some(e.collectives.get(&k).copied().unwrap_or(0)))?;
            Some((k, s))
        })
        .collect();
    MergedModule {
        root: e0.root.clone(),
        module: e0.module.clone(),
        kind: e0.kind.clone(),
        depth: e0.depth,
        phase: e0.phase.clone(),
        ranks: ((rows.len() as u32) < ranks).then_some(rows.len() as u32),
        calls: spread(&|e| Some(e.calls as i64)).expect("one row at least"),
        delta_bytes: spread(&|e| Some(e.delta_bytes)).expect("one row at least"),
        peak_bytes: spread(&|e| e.peak_bytes),
        peak_increase_bytes: spread(&|e| e.peak_increase_bytes),
        saved_bytes: spread(&|e| e.saved_bytes),
        parameter_bytes: spread(&|e| Some(e.parameter_bytes)).expect("one row at least"),
        collectives,
    }
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// The merged report in `format`.
pub fn render(m: &Merged, format: Format) -> String {
    crate::render::render_with(m, format, |m| table(m, None))
}

/// The merged report as printed: a table fitted to the terminal, when standard output is one.
pub fn render_printed(m: &Merged, format: Format) -> String {
    crate::render::render_with(m, format, |m| table(m, crate::output::terminal::width()))
}

/// `1.13 GiB (r1)`: the max and the rank holding it.
fn max_cell(s: &Spread, bytes: bool) -> String {
    let v = if bytes {
        units::bytes(s.max)
    } else {
        s.max.to_string()
    };
    format!("{v} (r{})", s.max_rank)
}

fn value(v: i64, bytes: bool, signed: bool) -> String {
    match (bytes, signed) {
        (true, true) => units::signed_bytes(v),
        (true, false) => units::bytes(v),
        _ => v.to_string(),
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

fn table(m: &Merged, width: Option<usize>) -> String {
    let mut out = String::new();
    let md = &m.metadata;
    let _ = writeln!(
        out,
        "memprof {} · torch {} · merged: {} of {} ranks{}",
        md.memprof_version,
        md.torch_version,
        md.ranks.len(),
        md.world_size,
        md.script
            .as_deref()
            .map(|s| format!(" of {s}"))
            .unwrap_or_default()
    );
    for r in &md.ranks {
        let outcome = if r.outcome == "completed" {
            String::new()
        } else {
            format!(" · {}", r.outcome)
        };
        let _ = writeln!(
            out,
            "  rank {} (local {}) on {}: {} · {}{outcome}",
            r.rank, r.local_rank, r.host, r.device, r.file
        );
    }
    let _ = writeln!(
        out,
        "Per line: max over ranks (the rank holding it), min, and the imbalance max − min"
    );
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
        let kinds = crate::render::kinds_in(f.lines.iter().map(|l| &l.collectives));
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
    let kinds = crate::render::kinds_in(modules.iter().map(|e| &e.collectives));
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
        let name = if e.module.is_empty() {
            format!("{} (root)", e.root)
        } else {
            e.module.clone()
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_names_the_rank_of_the_max_and_the_imbalance() {
        let s = Spread::of([(0, 10), (1, 40), (2, 40), (3, 5)]).unwrap();
        assert_eq!(
            s,
            Spread {
                max: 40,
                min: 5,
                max_rank: 1,
                imbalance: 35
            }
        );
        assert_eq!(Spread::of(std::iter::empty()), None);
        let one = Spread::of([(3, -7)]).unwrap();
        assert_eq!(
            (one.max, one.min, one.max_rank, one.imbalance),
            (-7, -7, 3, 0)
        );
    }
}
