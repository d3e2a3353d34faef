//! The `--modules` section of the table: the module tree (one row per module, forward and
//! backward side by side), the top modules by peak and by saved activations, and the checkpoint
//! plan.
use super::fit::cut;
use super::style::{fitted_columns, left_out_note, widest};
use crate::model::profile::{
    CheckpointPlan, CompiledModuleEntry, ModuleEntry, ModuleRow, ModulesProfile,
};
use crate::model::units;
use std::collections::HashMap;
use std::fmt::Write;

const TOP: usize = 5;

fn display_name(e: &ModuleRow) -> String {
    crate::model::profile::module_label(&e.root, &e.module)
}

/// The name in the module tree: indented by its depth.
fn tree_name(e: &ModuleRow) -> String {
    format!("{}{}", "  ".repeat(e.depth as usize), display_name(e))
}

/// A table's forward rows in order, and its backward rows by (root, module), which sit beside
/// them.
type Phases<'a, T> = (Vec<&'a T>, HashMap<(&'a str, &'a str), &'a T>);

fn phases<T: std::ops::Deref<Target = ModuleRow>>(rows: &[T]) -> Phases<'_, T> {
    let forward = rows.iter().filter(|e| e.phase == "forward").collect();
    let backward = rows
        .iter()
        .filter(|e| e.phase == "backward")
        .map(|e| ((e.root.as_str(), e.module.as_str()), e))
        .collect();
    (forward, backward)
}

fn opt_bytes(v: Option<i64>) -> String {
    v.map(units::bytes).unwrap_or_default()
}

/// Draws a table of modules, fitted to a terminal `width` wide when given: the columns in
/// `drop_order` make way first (least useful first), then the names in column `name` are cut.
/// The note under it says what was left out.
fn draw(
    out: &mut String,
    header: &[String],
    rows: Vec<Vec<String>>,
    right: std::ops::Range<usize>,
    drop_order: &[usize],
    name: usize,
    width: Option<usize>,
) {
    let right: Vec<usize> = right.collect();
    let Some(w) = width else {
        out.push_str(&fitted_columns(header, &rows, &right, &[], |_| true).0);
        return;
    };
    let (mut text, left_out) =
        fitted_columns(header, &rows, &right, drop_order, |t| widest(t) <= w);
    let excess = widest(&text).saturating_sub(w);
    if excess > 0 {
        let longest = rows
            .iter()
            .map(|r| r[name].chars().count())
            .max()
            .unwrap_or(0);
        let room = longest.saturating_sub(excess).max(MIN_NAME);
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|mut r| {
                r[name] = cut(&r[name], room);
                r
            })
            .collect();
        let dropped: Vec<usize> = drop_order[..left_out.len()].to_vec();
        text = fitted_columns(header, &rows, &right, &dropped, |_| false).0;
    }
    out.push_str(&text);
    left_out_note(
        out,
        w,
        &left_out,
        "the report's YAML/JSON (-o FILE) has them",
    );
}

/// The shortest a module's name is cut to on a narrow terminal.
const MIN_NAME: usize = 12;

/// Writes the `--modules` section, fitted to a terminal `width` wide when given.
pub fn render(out: &mut String, m: &ModulesProfile, width: Option<usize>) {
    let (forward, backward) = phases(&m.modules);
    let _ = writeln!(
        out,
        "\nModules{} · Δ summed over calls, peaks the highest of any call, saved = bytes saved for backward",
        m.depth
            .map(|d| format!(" (to depth {d})"))
            .unwrap_or_default()
    );
    if forward.is_empty() {
        let _ = writeln!(out, "no torch.nn.Module was called");
        return;
    }
    out.push('\n');
    // --collectives: a column per phase and kind that any module used.
    let kinds = |phase: &str| {
        crate::model::profile::collective_kinds_in(
            m.modules
                .iter()
                .filter(|e| e.phase == phase)
                .map(|e| &e.collectives),
        )
    };
    let (fwd_kinds, bwd_kinds) = (kinds("forward"), kinds("backward"));
    let mut header: Vec<String> = [
        "Module",
        "Type",
        "Calls",
        "Fwd Δ",
        "Fwd peak +",
        "Saved",
        "Bwd Δ",
        "Bwd peak +",
        "Params",
    ]
    .map(String::from)
    .to_vec();
    header.extend(fwd_kinds.iter().map(|k| format!("Fwd {k}")));
    header.extend(bwd_kinds.iter().map(|k| format!("Bwd {k}")));
    let mut rows = Vec::new();
    for e in &forward {
        let b = backward.get(&(e.root.as_str(), e.module.as_str()));
        let mut row = vec![
            tree_name(e),
            e.kind.clone(),
            e.calls.to_string(),
            units::signed_bytes(e.delta_bytes),
            opt_bytes(e.peak_increase_bytes),
            opt_bytes(e.saved_bytes),
            b.map(|b| units::signed_bytes(b.delta_bytes))
                .unwrap_or_default(),
            b.map(|b| opt_bytes(b.peak_increase_bytes))
                .unwrap_or_default(),
            parameters(e),
        ];
        let bytes_of = |entry: Option<&ModuleEntry>, kind: &str| {
            entry
                .and_then(|x| x.collectives.get(kind))
                .map(|&n| units::bytes(n))
                .unwrap_or_default()
        };
        row.extend(fwd_kinds.iter().map(|k| bytes_of(Some(e), k)));
        row.extend(bwd_kinds.iter().map(|k| bytes_of(b.copied(), k)));
        rows.push(row);
    }
    // What a narrow terminal keeps longest: the module, its peaks and saved bytes. The
    // collectives' columns go first, then Type, Calls, the Δs and Params.
    let mut drop_order: Vec<usize> = (9..header.len()).rev().collect();
    drop_order.extend([1, 2, 6, 3, 8]);
    draw(out, &header, rows, 2..header.len(), &drop_order, 0, width);
    if !m.compiled_modules.is_empty() && forward.iter().any(|e| e.kind == "OptimizedModule") {
        let _ = writeln!(
            out,
            "OptimizedModule: a torch.compile'd model, one call to the module hooks; its submodules are under Compiled modules below"
        );
    }
    if forward
        .iter()
        .any(|e| e.unsharded_parameter_bytes.is_some())
    {
        let _ = writeln!(
            out,
            "Params of sharded (DTensor) parameters: the local shards on this rank, of their full size"
        );
    }
    render_top(out, m, &forward, width);
    if m.timeline_dropped > 0 {
        let _ = writeln!(
            out,
            "note: the timeline in YAML/JSON holds the first {} calls; {} more were left out",
            m.timeline.len(),
            m.timeline_dropped
        );
    }
    render_compiled(out, &m.compiled_modules, width);
    if let Some(plan) = &m.checkpoints {
        render_plan(out, plan, width);
    }
}

/// The submodules of compiled models: what their graphs allocated and saved for each.
fn render_compiled(out: &mut String, entries: &[CompiledModuleEntry], width: Option<usize>) {
    let (forward, backward) = phases(entries);
    if forward.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nCompiled modules · the compiled graphs' buffers by the module of their FX nodes \
         (attributions of fused graphs, not calls), summed over the graphs' runs\n"
    );
    // CUDA graphs ran: what of the bytes went to their private pools.
    let pools = entries.iter().any(|e| e.pool_bytes.is_some());
    let mut header: Vec<String> = [
        "Module",
        "Type",
        "Runs",
        "Fwd allocated",
        "Saved",
        "Bwd allocated",
    ]
    .map(String::from)
    .to_vec();
    if pools {
        header.extend(["Fwd in CUDA-graph pools", "Bwd in CUDA-graph pools"].map(String::from));
    }
    let mut rows = Vec::new();
    for e in forward {
        let b = backward.get(&(e.root.as_str(), e.module.as_str()));
        let mut row = vec![
            tree_name(e),
            e.kind.clone(),
            e.calls.to_string(),
            units::bytes(e.allocated_bytes),
            opt_bytes(e.saved_bytes),
            b.map(|b| units::bytes(b.allocated_bytes))
                .unwrap_or_default(),
        ];
        if pools {
            row.push(opt_bytes(e.pool_bytes));
            row.push(b.map(|b| opt_bytes(b.pool_bytes)).unwrap_or_default());
        }
        rows.push(row);
    }
    let mut drop_order: Vec<usize> = (6..header.len()).rev().collect();
    drop_order.extend([1, 2]);
    draw(out, &header, rows, 2..header.len(), &drop_order, 0, width);
}

/// The Params cell: the bytes on this device, and the full size when some are sharded.
fn parameters(e: &ModuleEntry) -> String {
    match e.unsharded_parameter_bytes {
        Some(full) => format!(
            "{} of {}",
            units::bytes(e.parameter_bytes),
            units::bytes(full)
        ),
        None => units::bytes(e.parameter_bytes),
    }
}

/// The modules with no row below them in the table, ranked.
fn render_top(
    out: &mut String,
    m: &ModulesProfile,
    forward: &[&ModuleEntry],
    width: Option<usize>,
) {
    let has_child = |e: &ModuleEntry| {
        let prefix = format!("{}.", e.module);
        forward.iter().any(|c| {
            c.root == e.root
                && (e.module.is_empty() || c.module.starts_with(&prefix))
                && c.depth > e.depth
        })
    };
    let frontier: Vec<&ModuleEntry> = m
        .modules
        .iter()
        .filter(|e| e.depth > 0 && !has_child(e))
        .collect();
    if frontier.is_empty() {
        return;
    }
    let by_peak = |e: &ModuleEntry| e.peak_increase_bytes.unwrap_or(0);
    ranked(
        out,
        "Top modules by peak increase (forward or backward):",
        &frontier,
        by_peak,
        |e| format!("{} {}", display_name(e), e.phase),
        width,
    );
    let by_saved = |e: &ModuleEntry| e.saved_bytes.unwrap_or(0);
    ranked(
        out,
        "Top modules by saved activations:",
        &frontier,
        by_saved,
        |e| format!("{} ({} calls)", display_name(e), e.calls),
        width,
    );
}

/// The `TOP` entries with the largest nonzero `value`, largest first, under `title`.
fn ranked(
    out: &mut String,
    title: &str,
    entries: &[&ModuleEntry],
    value: impl Fn(&ModuleEntry) -> i64,
    describe: impl Fn(&ModuleEntry) -> String,
    width: Option<usize>,
) {
    let mut ranked: Vec<&ModuleEntry> = entries.iter().copied().filter(|e| value(e) > 0).collect();
    if ranked.is_empty() {
        return;
    }
    ranked.sort_by_key(|e| std::cmp::Reverse(value(e)));
    let _ = writeln!(out, "\n{title}");
    for e in ranked.into_iter().take(TOP) {
        let line = format!("  {:>12}  {}", units::bytes(value(e)), describe(e));
        let _ = writeln!(out, "{}", width.map_or(line.clone(), |w| cut(&line, w)));
    }
}

fn render_plan(out: &mut String, plan: &CheckpointPlan, width: Option<usize>) {
    let _ = writeln!(
        out,
        "\nCheckpoint suggestion for {} ({} split point{} among {} modules, from one measured forward pass):",
        plan.root,
        plan.requested,
        if plan.requested == 1 { "" } else { "s" },
        plan.candidates
    );
    let header = [
        "Segment",
        "First module",
        "Last module",
        "Modules",
        "Saved",
        "Input",
    ]
    .map(String::from);
    let mut rows = Vec::new();
    for (i, s) in plan.segments.iter().enumerate() {
        rows.push(vec![
            (i + 1).to_string(),
            s.first.clone(),
            s.last.clone(),
            s.modules.to_string(),
            units::bytes(s.saved_bytes),
            units::bytes(s.input_bytes),
        ]);
    }
    // The last module's name is cut last (the first is the previous segment's last, mostly).
    draw(out, &header, rows, 3..header.len(), &[3, 5, 1], 2, width);
    let _ = writeln!(
        out,
        "Activations saved for backward: {} measured; with each segment checkpointed, estimated {} \
         (the worst segment recomputed in backward, with the inputs kept at earlier segment starts{}). An estimate: transient gradients and \
         recomputation buffers come on top.",
        units::bytes(plan.activation_bytes),
        units::bytes(plan.estimated_activation_bytes),
        if plan.outside_candidates_bytes != 0 {
            format!(
                " + {} saved outside these modules",
                units::bytes(plan.outside_candidates_bytes)
            )
        } else {
            String::new()
        }
    );
    if plan.estimated_activation_bytes >= plan.activation_bytes {
        // Checkpointing trades recomputation for memory: here it would buy none.
        let _ = writeln!(
            out,
            "Checkpointing does not pay here: the estimate ({}) is not below what is saved now \
             ({}); the segments' inputs kept and the worst segment recomputed cost more than \
             they free (another number of split points may do better).",
            units::bytes(plan.estimated_activation_bytes),
            units::bytes(plan.activation_bytes)
        );
    }
}
