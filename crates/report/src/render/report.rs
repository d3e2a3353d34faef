//! A run's whole report as a table: the header lines (versions, device, schedule, notes), one
//! block per targeted function (with its peak), the run's peak, then the sections (tensors, modules, budgets, out of memory),
//! the warnings and how the script ended.
use super::fit::{wrap, Fit};
use crate::model::profile::Profile;
use std::fmt::Write;

/// The report's table at full width (files, pipes, snapshots).
pub fn render(p: &Profile) -> String {
    render_fitted(p, None)
}

/// The report's table, fitted to a terminal when `fit` says how wide it is: two-line headers,
/// the source text cut last, and (for default columns) the last stat columns left out when
/// nothing else makes room.
pub fn render_fitted(p: &Profile, fit: Option<Fit>) -> String {
    let mut out = String::new();
    let m = &p.metadata;
    let _ = writeln!(
        out,
        "memprof {} · torch {} · Python {} · device {}{}",
        m.memprof_version,
        m.torch_version,
        m.python_version,
        m.device.describe(),
        p.metadata
            .process
            .label()
            .map(|r| format!(" · {r} on {}", m.process.host))
            .unwrap_or_default()
    );
    if let Some(schedule) = &m.schedule {
        let _ = writeln!(
            out,
            "schedule: --warmup {}{}{}",
            schedule.warmup,
            schedule
                .calls
                .map(|c| format!(" --calls {c}"))
                .unwrap_or_default(),
            if schedule.stopped_early {
                " · every target had its calls, and memprof stopped its hooks"
            } else {
                ""
            }
        );
    }
    if m.collectives.is_some() {
        let _ = writeln!(
            out,
            "collectives: bytes of the torch.distributed collectives started during each line \
             (the full buffer of each; NCCL's own buffers are not included)"
        );
    }
    if let Some(reason) = &m.peak_resets {
        let _ = writeln!(out, "note: {reason}");
    }
    if let Some(h) = &p.history {
        let dropped = match h.dropped {
            Some(n) if n > 0 => format!(", {n} older ones dropped (--history-max-entries)"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "history: {} allocator events written to {}{dropped}; open it at \
             https://pytorch.org/memory_viz",
            h.events, h.file
        );
    }
    for f in &p.functions {
        out.push('\n');
        let width = fit.map(|f| f.width);
        let ran_eagerly = f.calls > 0;
        if ran_eagerly || f.compiled.is_none() {
            super::table::render_function(&mut out, p, f, fit);
        } else {
            super::table::render_heading(&mut out, f);
        }
        if let Some(compiled) = &f.compiled {
            super::compiled::render(&mut out, &f.qualname, compiled, ran_eagerly, width);
        }
        match (&f.peak, &p.peak) {
            // The same moment as the run's peak: said once, below.
            (Some(own), Some(run))
                if f.process.is_none() && own.reached.allocation == run.reached.allocation =>
            {
                let _ = writeln!(out, "\n{}: the run's peak, below", peak_title(f));
            }
            (Some(own), _) => {
                let title = peak_title(f);
                super::peak::render(
                    &mut out,
                    &title,
                    own,
                    super::peak::FUNCTION_ROWS,
                    width,
                    None,
                );
            }
            _ => {}
        }
    }
    if let Some(peak) = &p.peak {
        let width = fit.map(|f| f.width);
        let rerun = if m.command_line.get(1).is_some_and(|c| c == "attach") {
            Some(super::peak::Rerun::Attach(m.process.pid))
        } else {
            m.script.as_deref().map(|s| {
                if s.starts_with('<') {
                    super::peak::Rerun::InProcess
                } else {
                    super::peak::Rerun::Script(s)
                }
            })
        };
        super::peak::render(&mut out, "Peak", peak, usize::MAX, width, rerun);
    }
    if let Some(growth) = &p.growth {
        super::growth::render(&mut out, growth);
    }
    super::children::render(&mut out, &p.children);
    if p.functions.is_empty() && p.modules.is_none() && p.oom.is_none() && p.peak.is_none() {
        let _ = writeln!(
            out,
            "\nnothing to show: no targeted function ran, and nothing was allocated on the \
             measured device"
        );
    }
    if let Some(inventories) = &p.tensors {
        super::tensors::render(&mut out, inventories);
    }
    if let Some(modules) = &p.modules {
        super::modules::render(&mut out, modules, fit.map(|f| f.width));
    }
    if let Some(budgets) = &p.budgets {
        super::budgets::render(&mut out, budgets, &m.stats);
    }
    if let Some(oom) = &p.oom {
        super::oom::render(&mut out, oom);
    }
    for w in &p.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    match m.outcome.status.as_str() {
        "exception" => {
            let _ = writeln!(
                out,
                "the script raised {}",
                m.outcome.exception.as_deref().unwrap_or("an exception")
            );
        }
        "interrupted" | "terminated" => {
            let _ = writeln!(
                out,
                "the script was {}: this report covers what ran until then",
                m.outcome.status
            );
        }
        _ => {}
    }
    match fit {
        // The header lines and warnings too: on a terminal no text runs past the edge.
        Some(fit) => out
            .lines()
            .flat_map(|l| {
                // Text lines only: a table's rows (a leading space, the '=' rule) are fitted
                // already, and keep their columns when a very narrow terminal cannot hold them.
                let text = !l.starts_with(' ') && !l.starts_with('=');
                if text && l.chars().count() > fit.width {
                    wrap(l, fit.width)
                } else {
                    vec![l.to_string()]
                }
            })
            .map(|l| l + "\n")
            .collect(),
        None => out,
    }
}

/// What a function's own peak is the peak of: its calls, or (a function that ran only compiled)
/// the allocations of its compiled buffers.
fn peak_title(f: &crate::model::profile::FunctionProfile) -> String {
    if f.calls == 0 && f.compiled.is_some() {
        format!("Peak of {}'s compiled buffers", f.qualname)
    } else {
        format!("Peak of {}'s calls", f.qualname)
    }
}
