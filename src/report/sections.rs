//! The `--modules`, `--tensors` and out-of-memory sections of the report: read from the
//! bootstrap's JSON, cut to `--depth`, with the checkpoint plan computed from the measured pass
//! and the OOM suggestions from the measured numbers.
use crate::checkpoints::{self, Chain};
use crate::profile::{
    Inventory, ModuleEntry, ModuleEvent, ModulesProfile, OomReport, MODULE_SEMANTICS,
};
use serde::Deserialize;

/// What the bootstrap hands over (`reports_json`).
#[derive(Deserialize, Debug, Default)]
struct Collected {
    modules: Option<CollectedModules>,
    inventories: Option<Vec<Inventory>>,
    #[serde(default)]
    oom: Option<crate::oom::Recorded>,
    #[serde(default)]
    history: Option<CollectedHistory>,
}

#[derive(Deserialize, Debug)]
struct CollectedHistory {
    file: String,
    #[serde(default)]
    events: u64,
    max_entries: u64,
    #[serde(default)]
    dropped: Option<serde_json::Value>,
    #[serde(default)]
    source: String,
}

#[derive(Deserialize, Debug)]
struct CollectedModules {
    #[serde(default)]
    warnings: Vec<String>,
    entries: Vec<ModuleEntry>,
    timeline: Vec<ModuleEvent>,
    timeline_dropped: u64,
    chain: Option<Chain>,
}

/// How the sections are shaped.
#[derive(Clone, Copy, Debug, Default)]
pub struct SectionOptions {
    pub depth: Option<u32>,
    pub checkpoints: Option<u32>,
}

/// What the sections add to a report.
pub struct Sections {
    pub modules: Option<ModulesProfile>,
    pub tensors: Option<Vec<Inventory>>,
    pub oom: Option<OomReport>,
    pub history: Option<crate::profile::HistoryInfo>,
    pub warnings: Vec<String>,
}

/// The module profile and the inventories, from `json`; a warning when it cannot be read.
pub fn read(json: &str, options: SectionOptions) -> Result<Sections, String> {
    let collected: Collected = serde_json::from_str(json)
        .map_err(|e| format!("the --modules/--tensors/OOM data could not be read: {e}"))?;
    let mut warnings = Vec::new();
    let modules = collected.modules.map(|m| {
        warnings.extend(m.warnings);
        let keep = |depth: u32| options.depth.is_none_or(|d| depth <= d);
        let depth_of = |name: &str| {
            if name.is_empty() {
                0
            } else {
                name.matches('.').count() as u32 + 1
            }
        };
        let checkpoints = options
            .checkpoints
            .zip(m.chain.as_ref())
            .and_then(|(n, chain)| checkpoints::plan(chain, options.depth, n));
        ModulesProfile {
            semantics: MODULE_SEMANTICS.to_string(),
            depth: options.depth,
            modules: m.entries.into_iter().filter(|e| keep(e.depth)).collect(),
            timeline: m
                .timeline
                .into_iter()
                .filter(|e| keep(depth_of(&e.module)))
                .collect(),
            timeline_dropped: m.timeline_dropped,
            checkpoints,
        }
    });
    let oom = collected
        .oom
        .map(|recorded| crate::oom::report(recorded, modules.as_ref()));
    let history = collected.history.map(|h| {
        // On CUDA torch does not say whether its ring dropped events: a full ring may have.
        if h.dropped.is_none() && h.events >= h.max_entries {
            warnings.push(format!(
                "--history kept {} events, as many as --history-max-entries allows: older ones may \
                 have been dropped",
                h.events
            ));
        }
        crate::profile::HistoryInfo {
            file: h.file,
            events: h.events,
            max_entries: h.max_entries,
            dropped: h.dropped.and_then(|d| d.as_u64()),
            source: h.source,
        }
    });
    Ok(Sections {
        modules,
        tensors: collected.inventories,
        oom,
        history,
        warnings,
    })
}
