//! `memprof fit`'s report as a table (or YAML/JSON): predicted against measured, and where it
//! runs out of memory.
use crate::model::prediction::{LiveAt, Prediction};
use crate::model::trace::Measured;
use crate::model::units;
use crate::render::Format;
use std::fmt::Write;

pub fn render(p: &Prediction, format: Format, _terminal_width: Option<usize>) -> String {
    super::render_with(p, format, table)
}

fn table(p: &Prediction) -> String {
    let mut out = String::new();
    let settings = if p.settings.is_empty() {
        "default settings".to_string()
    } else {
        p.settings.clone()
    };
    let _ = writeln!(
        out,
        "memprof fit · {} ({} events) · {} for the allocator · {settings}",
        p.trace,
        p.events,
        units::bytes(p.memory_bytes)
    );
    if let Some(sim) = &p.simulated {
        let ranks = sim
            .ranks
            .map(|n| format!(", as rank 0 of {n} (one GPU each, collectives simulated)"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "simulated: {}{ranks} — the program ran without it, its CUDA tensors simulated; the \
             allocations replayed on the caching allocator's model",
            sim.gpu
        );
    }
    if let Some(batch) = p.batch {
        let traced: Vec<String> = p.traced_batches.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "at batch {batch}, synthesized from the traces at batch {} (each allocation's size \
             affine in the batch)",
            traced.join(", ")
        );
    }
    if let Some(n) = p.max_batch {
        let _ = writeln!(out, "largest batch that fits: {n}");
    }
    if let Some(u) = p.unmatched {
        if u.first_allocations + u.second_allocations > 0 {
            let _ = writeln!(
                out,
                "not matched between the traces (by line and stream, in order): {} allocation{} \
                 ({}) of the larger batch's trace, the template ({} sized as their line's like \
                 ones, the rest kept at their size); {} ({}) of the other only, left out",
                u.first_allocations,
                if u.first_allocations == 1 { "" } else { "s" },
                units::bytes(u.first_bytes as i64),
                u.first_sized_alike,
                u.second_allocations,
                units::bytes(u.second_bytes as i64),
            );
        }
    }
    if let Some(c) = &p.check {
        let off = |predicted: Option<i64>, traced: Option<i64>| match (predicted, traced) {
            (Some(p), Some(t)) if t > 0 => format!(
                "{} against {} ({:+.2}%)",
                units::bytes(p),
                units::bytes(t),
                (p - t) as f64 * 100.0 / t as f64
            ),
            _ => "unknown".into(),
        };
        let _ = writeln!(
            out,
            "check: the third trace's batch {} predicted from the first two, against its own \
             replay: allocated peak {}, reserved peak {}",
            c.batch,
            off(
                c.predicted.allocated_bytes_peak,
                c.traced.allocated_bytes_peak
            ),
            off(
                c.predicted.reserved_bytes_peak,
                c.traced.reserved_bytes_peak
            ),
        );
    }
    for line in &p.not_affine {
        let _ = writeln!(
            out,
            "warning: at {line} the third trace's sizes are not on the fitted line: the \
             prediction there is less sure"
        );
    }
    match &p.out_of_memory {
        None => {
            let _ = writeln!(out, "fits: yes");
        }
        Some(o) => {
            let at =
                o.at.as_deref()
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default();
            let _ = writeln!(
                out,
                "fits: no — runs out of memory at event {}{at}: tried to allocate {} (a {} \
                 segment) with {} allocated and {} reserved, after the cache was freed",
                o.event,
                units::bytes(o.requested_bytes),
                units::bytes(o.allocation_bytes),
                units::bytes(o.allocated_bytes),
                units::bytes(o.reserved_bytes)
            );
            live_rows(
                &mut out,
                "live then, by the line that allocated it:",
                &o.live,
                10,
                "lines",
            );
        }
    }
    live_rows(
        &mut out,
        "at the allocated peak, by line and category:",
        &p.peak_live,
        12,
        "rows",
    );
    out.push('\n');
    let measured = p.measured.clone().unwrap_or_default();
    let has_measured = p.measured.is_some();
    let _ = writeln!(
        out,
        "{:<26} {:>14}{}",
        "",
        "predicted",
        if has_measured {
            format!(" {:>14}", "measured")
        } else {
            String::new()
        }
    );
    type Stat = fn(&Measured) -> Option<i64>;
    let rows: [(&str, Stat, bool); 4] = [
        ("reserved_bytes.all.peak", |m| m.reserved_bytes_peak, true),
        ("allocated_bytes.all.peak", |m| m.allocated_bytes_peak, true),
        ("num_alloc_retries", |m| m.num_alloc_retries, false),
        ("segment.all.peak", |m| m.segment_peak, false),
    ];
    for (name, get, bytes) in rows {
        let show = |v: Option<i64>| match v {
            Some(v) if bytes => units::bytes(v),
            Some(v) => v.to_string(),
            None => "-".into(),
        };
        let _ = write!(out, "{name:<26} {:>14}", show(get(&p.predicted)));
        if has_measured {
            let _ = write!(out, " {:>14}", show(get(&measured)));
        }
        out.push('\n');
    }
    if let Some(sim) = &p.simulated {
        if !sim.notes.is_empty() {
            let _ = writeln!(
                out,
                "\nwhere the simulation stood in for the GPU (a simulated tensor has no values; \
                 where one decided a size, the prediction is less sure):"
            );
        }
        for place in &sim.notes {
            let _ = writeln!(out, "  {}: {}", place.at, place.what);
        }
    }
    if let Some(outside) = measured.outside_allocator_bytes {
        let _ = writeln!(
            out,
            "\noutside the caching allocator at the end of the traced run: {} (the CUDA \
             context, libraries' own memory, other processes; not in the model)",
            units::bytes(outside)
        );
    }
    out
}

/// What was live (at an out-of-memory error, or at a simulated run's allocated peak), largest
/// first: the first `shown` rows, with their category where the trace knows it, and the rest
/// summed.
fn live_rows(out: &mut String, heading: &str, rows: &[LiveAt], shown: usize, rest: &str) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "{heading}");
    for l in rows.iter().take(shown) {
        let category = l
            .category
            .as_deref()
            .map(|c| format!("{c:<22} "))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:>12} {:>6} block{}  {category}{}",
            units::bytes(l.bytes),
            l.blocks,
            if l.blocks == 1 { " " } else { "s" },
            l.at
        );
    }
    if rows.len() > shown {
        let bytes: i64 = rows[shown..].iter().map(|l| l.bytes).sum();
        let _ = writeln!(
            out,
            "  {:>12} in {} more {rest}",
            units::bytes(bytes),
            rows.len() - shown
        );
    }
}
