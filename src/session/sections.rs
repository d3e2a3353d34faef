//! What the Python side hands back at the end of a run (one JSON document, `report()` in
//! bootstrap.py: this file holds its schema), and the `--modules`, `--tensors`, `--history` and
//! out-of-memory sections made from it: cut to `--depth`, with the checkpoint plan computed from
//! the measured pass and the OOM suggestions from the measured numbers.
use crate::analysis::checkpoints::{self, Chain};
use crate::model::profile::{
    CompiledModuleEntry, Inventory, ModuleEntry, ModuleEvent, ModulesProfile, OomReport,
    COMPILED_MODULE_SEMANTICS, MODULE_SEMANTICS,
};
use serde::Deserialize;

/// What the bootstrap hands back (`report()`): every key is always there, and a key either side
/// does not know is an error, so the two sides cannot drift apart unseen.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Collected {
    modules: Option<CollectedModules>,
    inventories: Option<Vec<Inventory>>,
    oom: Option<crate::analysis::oom::Recorded>,
    history: Option<CollectedHistory>,
    /// Targets that matched nothing, or several functions.
    pub target_warnings: Vec<String>,
    /// The CUDA device's name, when CUDA was initialised.
    pub device_name: Option<String>,
    /// (storage data_ptr, category) of every storage a tensor in memory held when the run ended:
    /// parameters, buffers, gradients, optimizer state, a graph pool's, else "other" (None: not
    /// looked for). The peak's categories of what was still live then.
    pub tensor_roles: Option<Vec<(u64, String)>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct CollectedHistory {
    file: String,
    events: u64,
    max_entries: u64,
    /// A count, None, or "unknown" (a full CUDA ring).
    dropped: Option<serde_json::Value>,
    source: String,
    /// Why nothing was recorded; the history file says it too.
    #[allow(dead_code)]
    note: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct CollectedModules {
    warnings: Vec<String>,
    entries: Vec<ModuleEntry>,
    timeline: Vec<ModuleEvent>,
    timeline_dropped: u64,
    chain: Option<Chain>,
    /// The submodules of compiled models (`py/compiled_modules.py`), and the forward pass of the
    /// one that saved the most, for checkpoint suggestions inside it.
    compiled: Vec<CompiledModuleEntry>,
    compiled_chain: Option<Chain>,
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
    pub history: Option<crate::model::profile::HistoryInfo>,
    pub warnings: Vec<String>,
}

/// Reads the bootstrap's document; the error is the warning the report carries instead.
pub fn parse(json: &str) -> Result<Collected, String> {
    serde_json::from_str(json)
        .map_err(|e| format!("the --modules/--tensors/OOM data could not be read: {e}"))
}

/// The sections made from what the bootstrap collected.
pub fn read(collected: Collected, options: SectionOptions) -> Sections {
    let mut warnings = Vec::new();
    let modules = collected.modules.map(|mut m| {
        warnings.extend(m.warnings);
        let depths = CalledDepths::of(m.entries.iter().map(|e| (&e.root, &e.module)));
        for e in &mut m.entries {
            e.depth = depths.of_module(&e.root, &e.module);
        }
        if let Some(chain) = &mut m.chain {
            for c in &mut chain.calls {
                c.depth = depths.of_module(&chain.root, &c.module);
            }
        }
        let keep = |depth: u32| options.depth.is_none_or(|d| depth <= d);
        // A compiled model is one call to the module hooks: its plan comes from its graphs.
        let checkpoints = options.checkpoints.and_then(|n| {
            [&m.chain, &m.compiled_chain]
                .into_iter()
                .flatten()
                .find_map(|chain| checkpoints::plan(chain, options.depth, n))
        });
        let compiled_semantics =
            (!m.compiled.is_empty()).then(|| COMPILED_MODULE_SEMANTICS.to_string());
        ModulesProfile {
            semantics: MODULE_SEMANTICS.to_string(),
            depth: options.depth,
            modules: m.entries.into_iter().filter(|e| keep(e.depth)).collect(),
            timeline: m
                .timeline
                .into_iter()
                .filter(|e| keep(depths.of_module(&e.root, &e.module)))
                .collect(),
            timeline_dropped: m.timeline_dropped,
            checkpoints,
            compiled_modules: m.compiled.into_iter().filter(|e| keep(e.depth)).collect(),
            compiled_semantics,
        }
    });
    let oom = collected
        .oom
        .map(|recorded| crate::analysis::oom::report(recorded, modules.as_ref()));
    let history = collected.history.map(|h| {
        // On CUDA torch does not say whether its ring dropped events: a full ring may have.
        if h.dropped.is_none() && h.events >= h.max_entries {
            warnings.push(format!(
                "--history kept {} events, as many as --history-max-entries allows: older ones may \
                 have been dropped",
                h.events
            ));
        }
        crate::model::profile::HistoryInfo {
            file: h.file,
            events: h.events,
            max_entries: h.max_entries,
            dropped: h.dropped.and_then(|d| d.as_u64()),
            source: h.source,
        }
    });
    Sections {
        modules,
        tensors: collected.inventories,
        oom,
        history,
        warnings,
    }
}

/// A module's depth counted over the modules that were called: a container that is never called
/// itself (GPT-2's `transformer.h`, a `ModuleList`) adds no level, so `transformer.h.0` is at
/// depth 2 under `transformer`, as the calls nest, not 3 as its name has parts.
struct CalledDepths {
    /// Per root, the names of its modules that were called.
    called: std::collections::HashMap<String, std::collections::HashSet<String>>,
}

impl CalledDepths {
    /// From the (root, module) of every module that was called.
    fn of<'a>(called: impl Iterator<Item = (&'a String, &'a String)>) -> Self {
        let mut by_root =
            std::collections::HashMap::<String, std::collections::HashSet<String>>::new();
        for (root, module) in called {
            by_root
                .entry(root.clone())
                .or_default()
                .insert(module.clone());
        }
        CalledDepths { called: by_root }
    }

    /// 0 for the root; else 1 + the number of called modules whose names are prefixes of it.
    fn of_module(&self, root: &str, module: &str) -> u32 {
        if module.is_empty() {
            return 0;
        }
        let Some(called) = self.called.get(root) else {
            return 1;
        };
        let called_ancestors = module
            .match_indices('.')
            .filter(|(i, _)| called.contains(&module[..*i]))
            .count();
        called_ancestors as u32 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_never_called_adds_no_depth() {
        let called: Vec<(String, String)> = [
            "",
            "transformer",
            "transformer.h.0",
            "transformer.h.0.attn",
            "transformer.ln_f",
        ]
        .iter()
        .map(|m| ("GPT2".to_string(), m.to_string()))
        .collect();
        let d = CalledDepths::of(called.iter().map(|(r, m)| (r, m)));
        assert_eq!(d.of_module("GPT2", ""), 0);
        assert_eq!(d.of_module("GPT2", "transformer"), 1);
        assert_eq!(d.of_module("GPT2", "transformer.h.0"), 2);
        assert_eq!(d.of_module("GPT2", "transformer.h.0.attn"), 3);
        assert_eq!(d.of_module("GPT2", "transformer.ln_f"), 2);
        // Another root's modules are not this one's ancestors.
        assert_eq!(d.of_module("Other", "transformer.h.0"), 1);
    }
}
