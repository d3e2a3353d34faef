//! Assembles the report model from the recorder's aggregates and the run's facts.
use crate::capture::recorder::{FunctionRecord, Recorder};
use crate::model::compiled::CompiledLines;
use crate::model::profile::{
    DeviceInfo, FunctionProfile, LineProfile, Metadata, Outcome, ProcessInfo, Profile, Schedule,
    StatColumn, COLLECTIVES_SEMANTICS, SCHEMA, SEMANTICS,
};
use std::collections::BTreeMap;

/// Everything about the run that the recorder does not know.
pub struct RunContext {
    pub torch_version: String,
    pub python_version: String,
    pub device: DeviceInfo,
    pub command_line: Vec<String>,
    pub outcome: Outcome,
    pub warnings: Vec<String>,
    pub process: ProcessInfo,
    pub script: Option<String>,
    pub schedule: Option<Schedule>,
    pub hook_events: u64,
}

/// Builds the report. Source lines are read from the functions' files (empty if unreadable).
/// `compiled`: each recorder function's compiled lines, in its order (`session::compiled`).
pub fn build(
    recorder: &Recorder,
    ctx: RunContext,
    compiled: Vec<Option<CompiledLines>>,
) -> Profile {
    let columns = recorder.sampler().shown_columns();
    let stats = columns
        .iter()
        .map(|c| StatColumn {
            key: c.key.clone(),
            is_bytes: c.is_bytes,
            aggregation: if c.field.sums_over_hits() {
                "sum"
            } else {
                "max"
            }
            .to_string(),
        })
        .collect();
    let mut warnings = ctx.warnings;
    let mut functions = Vec::new();
    let mut compiled = compiled.into_iter();
    for f in &recorder.functions {
        let compiled_lines = compiled.next().flatten();
        if compiled_lines.is_some() {
            let mut profile = function_profile(recorder, f, ctx.schedule.is_some());
            profile.compiled = compiled_lines;
            functions.push(profile);
            continue;
        }
        if f.calls == 0 && f.lines.is_empty() {
            if crate::capture::children::is_child() {
                // A forked child (a DataLoader worker) inherits the run's targets; the parent's
                // report says which never ran anywhere.
                continue;
            }
            warnings.push(format!(
                "{} ({}:{}) was targeted by {} but never ran",
                f.qualname,
                f.file,
                f.first_line,
                f.targets.join(", ")
            ));
            continue;
        }
        if let Some(schedule) = ctx.schedule.as_ref().filter(|_| f.measured.is_none()) {
            // It ran, but every call was in the warm-up: say so rather than show an empty table.
            warnings.push(format!(
                "{} ({}:{}) ran {} time{}, all within --warmup {}: no call was measured \
                 (a --warmup below {} measures some)",
                f.qualname,
                f.file,
                f.first_line,
                f.calls,
                if f.calls == 1 { "" } else { "s" },
                schedule.warmup,
                f.calls
            ));
        }
        functions.push(function_profile(recorder, f, ctx.schedule.is_some()));
    }
    functions.sort_by(|a, b| (&a.file, a.first_line).cmp(&(&b.file, b.first_line)));
    Profile {
        schema: SCHEMA.to_string(),
        metadata: Metadata {
            memprof_version: env!("CARGO_PKG_VERSION").to_string(),
            torch_version: ctx.torch_version,
            python_version: ctx.python_version,
            device: ctx.device,
            command_line: ctx.command_line,
            stats,
            peak_resets: recorder.sampler().peak_reset_reason(),
            semantics: SEMANTICS.to_string(),
            outcome: ctx.outcome,
            process: ctx.process,
            script: ctx.script,
            schedule: ctx.schedule,
            hook_events: ctx.hook_events,
            collectives: recorder
                .sampler()
                .counts_collectives()
                .then(|| COLLECTIVES_SEMANTICS.to_string()),
        },
        functions,
        modules: None,
        tensors: None,
        budgets: None,
        oom: None,
        history: None,
        peak: None,
        timeline: None,
        growth: None,
        children: Vec::new(),
        warnings,
    }
}

fn function_profile(recorder: &Recorder, f: &FunctionRecord, schedule: bool) -> FunctionProfile {
    let source = match &f.source {
        Some(text) => text.clone(),
        None => std::fs::read_to_string(&f.file)
            .ok()
            .or_else(|| crate::python::ext::file_text(&f.file))
            .unwrap_or_default(),
    };
    let source_lines: Vec<&str> = source.lines().collect();
    let keys: Vec<&str> = recorder
        .sampler()
        .shown_columns()
        .iter()
        .map(|c| c.key.as_str())
        .collect();
    let last = f.last_line.max(f.lines.keys().copied().max().unwrap_or(0));
    let mut total_peak: Option<i64> = None;
    let mut lines = Vec::new();
    for line in f.first_line..=last {
        let text = source_lines
            .get((line as usize).saturating_sub(1))
            .map(|s| s.to_string())
            .unwrap_or_default();
        let mut out = LineProfile {
            line,
            source: text,
            hits: 0,
            raised: 0,
            delta_bytes: None,
            stats: BTreeMap::new(),
            collectives: BTreeMap::new(),
        };
        if let Some(agg) = f.lines.get(&line) {
            let (values, peak) = recorder.sampler().shown_values(agg);
            out.hits = agg.hits;
            out.raised = agg.raised;
            if peak.is_some() {
                out.delta_bytes = Some(agg.delta);
                total_peak = total_peak.max(peak);
                out.stats = keys
                    .iter()
                    .map(|k| k.to_string())
                    .zip(values.iter().copied())
                    .collect();
                out.collectives = collective_bytes(&agg.collectives);
            }
        }
        lines.push(out);
    }
    FunctionProfile {
        qualname: f.qualname.clone(),
        file: f.file.clone(),
        first_line: f.first_line,
        targets: f.targets.clone(),
        calls: f.calls,
        measured_calls: schedule.then(|| f.measured.map(|(a, b)| [a, b])).flatten(),
        peak_allocated_bytes: total_peak,
        lines,
        peak: None,
        compiled: None,
        process: None,
    }
}

/// The kinds of collective with any bytes, from counters laid out as `torch::collectives`
/// reads them (bytes per kind first).
pub fn collective_bytes(counters: &[i64]) -> BTreeMap<String, i64> {
    crate::model::profile::COLLECTIVE_KINDS
        .iter()
        .zip(counters)
        .filter(|(_, &bytes)| bytes != 0)
        .map(|(kind, &bytes)| (kind.to_string(), bytes))
        .collect()
}
