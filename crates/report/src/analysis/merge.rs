//! `memprof merge` (and `memprof show` given several files): the reports of a job's ranks side
//! by side. Per function line and per module row, each number's max, median and min over the
//! ranks, the rank holding the max, and the imbalance (max − min); the hosts and the missing
//! ranks. Linear in the ranks: every lookup is indexed.
use crate::error::{Error, Result};
use crate::model::merged::*;
use crate::model::profile::{
    collective_kinds_in, file_name, FunctionProfile, LineProfile, ModuleEntry, Profile,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Keeps only the `--stat` columns asked for (all when none); a key the reports lack is an error.
pub fn keep_stats(m: &mut Merged, requested: &[String]) -> Result<()> {
    let keys = crate::model::stats::requested_keys(requested);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
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
    if let Some((file, p)) = reports
        .iter()
        .find(|(_, p)| p.metadata.process.child.is_some())
    {
        return Err(Error::usage(format!(
            "{} is the report of a child process (pid {}), not of a rank: merge takes ranks",
            file.display(),
            p.metadata.process.pid
        ))
        .hint(
            "its functions are in its parent's report, marked with the child: memprof show \
             PARENT.json (or memprof show this file alone)",
        ));
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
    let given: HashSet<u32> = ranks.iter().map(|r| r.rank).collect();
    let missing_ranks: Vec<u32> = (0..world).filter(|r| !given.contains(r)).collect();
    if world as usize != reports.len() {
        warnings.push(format!(
            "the run had {world} ranks and {} reports were given{}",
            reports.len(),
            if missing_ranks.is_empty() {
                String::new()
            } else {
                format!(
                    ": no report of rank{} {}",
                    if missing_ranks.len() == 1 { "" } else { "s" },
                    rank_list(&missing_ranks)
                )
            }
        ));
    }
    let rank_of = |p: &Profile| p.metadata.process.rank;

    // Functions, in the first report's order, then any only other ranks ran; each with its
    // ranks' profiles (indexed once: 1024 ranks' reports must merge in seconds).
    let mut by_function: Vec<Vec<(u32, &FunctionProfile)>> = Vec::new();
    let mut function_index: HashMap<(&str, &str), usize> = HashMap::new();
    for (_, p) in &reports {
        for f in &p.functions {
            let key = (f.qualname.as_str(), file_name(&f.file));
            let i = *function_index.entry(key).or_insert_with(|| {
                by_function.push(Vec::new());
                by_function.len() - 1
            });
            // A report lists a function once; the first if not.
            if by_function[i].last().map(|(r, _)| *r) != Some(rank_of(p)) {
                by_function[i].push((rank_of(p), f));
            }
        }
    }
    let functions = by_function
        .iter()
        .map(|found| merge_function(found, first, n))
        .collect();

    // Module rows, in the first report's order, then those only other ranks had.
    let mut by_module: Vec<Vec<(u32, &ModuleEntry)>> = Vec::new();
    let mut module_index: HashMap<(&str, &str, &str), usize> = HashMap::new();
    for (_, p) in &reports {
        for e in p.modules.iter().flat_map(|m| &m.modules) {
            let key = (e.root.as_str(), e.module.as_str(), e.phase.as_str());
            let i = *module_index.entry(key).or_insert_with(|| {
                by_module.push(Vec::new());
                by_module.len() - 1
            });
            if by_module[i].last().map(|(r, _)| *r) != Some(rank_of(p)) {
                by_module[i].push((rank_of(p), e));
            }
        }
    }
    let modules = by_module.iter().map(|rows| merge_module(rows, n)).collect();
    let peak = super::peaks::merge(
        &reports
            .iter()
            .filter_map(|(_, p)| p.peak.as_ref().map(|k| (rank_of(p), k)))
            .collect::<Vec<_>>(),
        reports
            .iter()
            .filter(|(_, p)| p.peak.is_none())
            .map(|(_, p)| rank_of(p))
            .collect(),
    )
    .map(|mut peak| {
        peak.outliers = super::rank_outliers::outliers(&peak, &ranks);
        peak
    });
    Ok(Merged {
        schema: MERGED_SCHEMA.to_string(),
        metadata: MergedMetadata {
            memprof_version: first.metadata.memprof_version.clone(),
            torch_version: first.metadata.torch_version.clone(),
            script: first.metadata.script.clone(),
            world_size: world,
            stats: first.metadata.stats.clone(),
            missing_ranks,
            hosts: hosts(&ranks),
            ranks,
            semantics: MERGED_SEMANTICS.to_string(),
        },
        functions,
        modules,
        peak,
        warnings,
    })
}

/// One function's lines over the ranks that ran it (`found`, ranks ascending).
fn merge_function(found: &[(u32, &FunctionProfile)], first: &Profile, n: u32) -> MergedFunction {
    let mut by_line: BTreeMap<u32, Vec<(u32, &LineProfile)>> = BTreeMap::new();
    for (r, f) in found {
        for l in &f.lines {
            by_line.entry(l.line).or_default().push((*r, l));
        }
    }
    let lines = by_line
        .into_iter()
        .map(|(number, per_rank)| merge_line(number, &per_rank, first, n))
        .collect();
    let (_, f0) = found[0];
    MergedFunction {
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
    }
}

/// One line over the ranks whose reports have it.
fn merge_line(
    number: u32,
    per_rank: &[(u32, &LineProfile)],
    first: &Profile,
    n: u32,
) -> MergedLine {
    let ran: Vec<(u32, &LineProfile)> = per_rank
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
    let collectives = collective_kinds_in(ran.iter().map(|(_, l)| &l.collectives))
        .into_iter()
        .filter_map(|k| {
            let s = Spread::of(
                ran.iter()
                    .map(|(r, l)| (*r, l.collectives.get(&k).copied().unwrap_or(0))),
            )?;
            Some((k, s))
        })
        .collect();
    MergedLine {
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
    }
}

/// The hosts in the order of their lowest rank, each with its ranks (`ranks` ascending).
fn hosts(ranks: &[RankReport]) -> Vec<HostRanks> {
    let mut out: Vec<HostRanks> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for r in ranks {
        let i = *index.entry(r.host.as_str()).or_insert_with(|| {
            out.push(HostRanks {
                host: r.host.clone(),
                ranks: Vec::new(),
            });
            out.len() - 1
        });
        out[i].ranks.push(r.rank);
    }
    out
}

fn merge_module(rows: &[(u32, &ModuleEntry)], ranks: u32) -> MergedModule {
    let e0 = rows[0].1;
    let spread = |f: &dyn Fn(&ModuleEntry) -> Option<i64>| {
        Spread::of(rows.iter().filter_map(|(r, e)| f(e).map(|v| (*r, v))))
    };
    let collectives = collective_kinds_in(rows.iter().map(|(_, e)| &e.collectives))
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
