//! The compiled lines of targeted functions: the tracker's allocations at compiled sites
//! (`python::sites` attributes a compiled graph's buffers to the FX nodes' source frames) summed
//! onto the lines of each targeted function those frames pass through.
use super::source::SourceFiles;
use crate::capture::peak::{TargetRange, Tracker};
use crate::capture::recorder::FunctionRecord;
use crate::model::compiled::{CompiledLine, CompiledLines, COMPILED_SEMANTICS};
use crate::python::sites;
use std::collections::{BTreeMap, HashMap};

/// What one line of a targeted function got from compiled graphs.
#[derive(Default)]
struct Sums {
    allocations: u64,
    allocated: i64,
    backward: i64,
    live_at_peak: i64,
}

/// `f` as the site finder matches compiled frames to it.
fn target(id: usize, f: &FunctionRecord) -> TargetRange {
    TargetRange {
        id: id as u64,
        file: f.file.clone(),
        qualname: f.qualname.clone(),
        first_line: f.first_line,
        last_line: f.last_line,
    }
}

/// Each targeted function's compiled lines (None for those no compiled graph reached), by the
/// recorder's function order.
pub fn lines_by_function(
    functions: &[FunctionRecord],
    tracker: &mut Tracker,
) -> Vec<Option<CompiledLines>> {
    let chains = sites::compiled_chains();
    if chains.is_empty() {
        return functions.iter().map(|_| None).collect();
    }
    let node_lines = sites::compiled_node_lines();
    let mut files = SourceFiles::default();
    functions
        .iter()
        .enumerate()
        .map(|(id, f)| {
            let t = target(id, f);
            // Live at the function's own peak: the highest allocated bytes at its calls or at
            // an allocation of its compiled buffers.
            let live: HashMap<u32, i64> = tracker
                .function_peak(id as u64)
                .map(|c| c.sites.iter().map(|s| (s.site, s.bytes)).collect())
                .unwrap_or_default();
            let mut by_line: BTreeMap<u32, Sums> = BTreeMap::new();
            for (site, site_chains) in &chains {
                // The first chain through the function decides the line (a site's chains differ
                // only in callers beyond its context).
                let Some(p) = site_chains
                    .iter()
                    .find_map(|c| c.iter().find(|p| sites::in_target(p, &t)))
                else {
                    continue;
                };
                let (allocations, allocated, backward) = tracker.site_totals(*site);
                let sums = by_line.entry(p.line).or_default();
                sums.allocations += allocations;
                sums.allocated += allocated;
                sums.backward += backward;
                sums.live_at_peak += live.get(site).copied().unwrap_or(0);
            }
            for p in node_lines.iter().filter(|p| sites::in_target(p, &t)) {
                by_line.entry(p.line).or_default();
            }
            if by_line.is_empty() {
                return None;
            }
            let lines = by_line
                .into_iter()
                .map(|(line, s)| CompiledLine {
                    line,
                    source: files.line(&f.file, line).to_string(),
                    allocations: s.allocations,
                    allocated_bytes: s.allocated,
                    backward_allocated_bytes: s.backward,
                    peak_live_bytes: s.live_at_peak,
                    fused: s.allocations == 0,
                })
                .collect();
            Some(CompiledLines {
                semantics: COMPILED_SEMANTICS.to_string(),
                lines,
            })
        })
        .collect()
}
