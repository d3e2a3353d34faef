//! Out-of-memory forensics on the Rust side: the report's `oom` record from what the bootstrap
//! recorded (src/python/py/oom.py), and the suggestions, ranked by the bytes each would save.
use crate::model::profile::file_name;
use crate::model::profile::{ModulesProfile, OomEvent, OomReport, OomSuggestion, OOM_SEMANTICS};
use crate::model::units;
use serde::Deserialize;

/// What the bootstrap hands over (`report()` in src/python/py/oom.py).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    pub count: u64,
    pub caught: u64,
    pub events: Vec<OomEvent>,
    pub scan_seconds: f64,
}

/// The report's record, with suggestions drawn from the OOM that matters most (the one that
/// ended the program, else the latest) and from `--modules` when it ran.
pub fn report(recorded: Recorded, modules: Option<&ModulesProfile>) -> OomReport {
    let focus = recorded
        .events
        .iter()
        .find(|e| !e.caught)
        .or(recorded.events.last());
    let suggestions = focus.map(|e| suggestions(e, modules)).unwrap_or_default();
    OomReport {
        semantics: OOM_SEMANTICS.to_string(),
        count: recorded.count,
        caught: recorded.caught,
        events: recorded.events,
        scan_seconds: recorded.scan_seconds,
        suggestions,
    }
}

/// Every suggestion the numbers support, the largest saving first (those without a number last).
fn suggestions(e: &OomEvent, modules: Option<&ModulesProfile>) -> Vec<OomSuggestion> {
    let mut out = Vec::new();
    let place = e
        .line
        .as_ref()
        .map(|l| format!("{}:{} ({})", file_name(&l.file), l.line, l.function))
        .unwrap_or_else(|| "the failing line".into());
    let in_backward =
        e.thread == "autograd" || e.modules_active.iter().any(|m| m.ends_with("(backward)"));

    if let (Some(requested), Some(free)) = (e.requested_bytes, usable_free(e)) {
        let short_by = (requested - free).max(0);
        out.push(OomSuggestion {
            kind: "smaller_batch".into(),
            text: format!(
                "{place} asked for {} with {} free{}: it needs {} more. A smaller batch (or \
                 sequence) makes what this line allocates smaller in proportion; or free that \
                 much before it.",
                units::bytes(requested),
                units::bytes(free),
                if e.process_cap_bytes.is_some() {
                    " under the process's cap"
                } else {
                    " on the device"
                },
                units::bytes(short_by)
            ),
            saving_bytes: Some(short_by),
        });
    }

    if let (Some(frag), false) = (e.fragmentation_bytes, e.expandable_segments) {
        let fits = match (e.requested_bytes, usable_free(e)) {
            (Some(r), Some(f)) => frag + f >= r && frag > 0,
            _ => false,
        };
        let largest = e
            .largest_free_block_bytes
            .map(|b| format!(", and its largest free block is {}", units::bytes(b)))
            .unwrap_or_default();
        if fits {
            out.push(OomSuggestion {
                kind: "expandable_segments".into(),
                text: format!(
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: PyTorch held {} reserved \
                     but unallocated{largest}; the request would have fit in that plus the free \
                     memory had it been contiguous.",
                    units::bytes(frag)
                ),
                saving_bytes: Some(frag),
            });
        }
    }

    if let Some(tensors) = &e.tensors {
        let gradients = tensors
            .categories
            .iter()
            .find(|c| c.category == "gradients")
            .map(|c| c.bytes)
            .unwrap_or(0);
        if gradients > 0 && !in_backward {
            out.push(OomSuggestion {
                kind: "free_gradients".into(),
                text: format!(
                    "{} of gradients were alive outside backward: free them before the forward \
                     pass (optimizer.zero_grad(set_to_none=True), or set_to_none left at its \
                     default), or let the optimizer step run before the next forward.",
                    units::bytes(gradients)
                ),
                saving_bytes: Some(gradients),
            });
        }
        // Held by a variable of an outer frame only: the failing frame's own are in use there.
        let inner = e.line.as_ref().map(|l| format!("{}:", l.function));
        let outer_only = |name: &str| {
            name.contains(':')
                && name
                    .split(", ")
                    .all(|n| inner.as_deref().is_none_or(|i| !n.starts_with(i)))
        };
        if let Some(t) = tensors
            .tensors
            .iter()
            .find(|t| t.category == "other" && t.name.as_deref().is_some_and(outer_only))
        {
            out.push(OomSuggestion {
                kind: "free_tensor".into(),
                text: format!(
                    "the largest live tensor outside the model and optimizer is {} ({}, {:?} {}): \
                     if it is not needed by then, `del` it (or compute it later) before {place}.",
                    t.name.as_deref().unwrap_or_default(),
                    units::bytes(t.bytes),
                    t.shape,
                    t.dtype
                ),
                saving_bytes: Some(t.bytes),
            });
        }
    }

    match modules {
        Some(m) => {
            if let Some(plan) = &m.checkpoints {
                let saving = plan.activation_bytes - plan.estimated_activation_bytes;
                if saving > 0 {
                    out.push(OomSuggestion {
                        kind: "activation_checkpointing".into(),
                        text: format!(
                            "activation checkpointing as planned above ({} segments of {}): \
                             activations {} → about {}.",
                            plan.segments.len(),
                            plan.root,
                            units::bytes(plan.activation_bytes),
                            units::bytes(plan.estimated_activation_bytes)
                        ),
                        saving_bytes: Some(saving),
                    });
                }
            } else if let Some((row, saved)) = m
                .modules
                .iter()
                .filter(|r| r.phase == "forward" && r.depth == 1)
                .map(|r| (r, largest_call_saved(m, &r.root, &r.module)))
                .filter(|(_, b)| *b > 0)
                .max_by_key(|(_, b)| *b)
            {
                out.push(OomSuggestion {
                    kind: "activation_checkpointing".into(),
                    text: format!(
                        "torch.utils.checkpoint around {}.{} ({}): its largest forward call saved \
                         {} for backward (measured by --modules); checkpointed, it keeps only its \
                         inputs and recomputes the rest. --suggest-checkpoints N plans N \
                         segments.",
                        row.root,
                        row.module,
                        row.kind,
                        units::bytes(saved)
                    ),
                    saving_bytes: Some(saved),
                });
            }
        }
        None => out.push(OomSuggestion {
            kind: "measure_activations".into(),
            text: "run again with --modules --suggest-checkpoints to see what each module saves \
                   for backward and what activation checkpointing would save."
                .into(),
            saving_bytes: None,
        }),
    }
    // The largest saving first; suggestions without a number keep their order, last.
    out.sort_by_key(|s| std::cmp::Reverse(s.saving_bytes.map(|b| b + 1).unwrap_or(0)));
    out
}

/// What the process could still have had: the device's free memory, and under a cap
/// (set_per_process_memory_fraction) no more than the cap less what PyTorch reserved.
fn usable_free(e: &OomEvent) -> Option<i64> {
    let free = e.device_free_bytes?;
    Some(match (e.process_cap_bytes, e.reserved_bytes) {
        (Some(cap), Some(reserved)) => free.min((cap - reserved).max(0)),
        _ => free,
    })
}

/// The most one forward call of `root`.`module` saved for backward (from the timeline; the
/// average over its calls when the timeline was cut short).
fn largest_call_saved(m: &ModulesProfile, root: &str, module: &str) -> i64 {
    let from_timeline = m
        .timeline
        .iter()
        .filter(|e| e.root == root && e.module == module && e.phase == "forward")
        .filter_map(|e| e.saved_bytes)
        .max();
    from_timeline.unwrap_or_else(|| {
        m.modules
            .iter()
            .find(|r| r.root == root && r.module == module && r.phase == "forward")
            .map(|r| r.saved_bytes.unwrap_or(0) / r.calls.max(1) as i64)
            .unwrap_or(0)
    })
}
