//! The "Out of memory" section of the table: each recorded OOM (where, what it asked for, what
//! the allocator held, the modules running, the largest live tensors) and the ranked suggestions.
use crate::model::profile::{OomEvent, OomReport};
use crate::model::units;
use std::fmt::Write;

/// Live tensors listed per OOM in the table (YAML/JSON keep the inventory's full list).
const TENSORS_SHOWN: usize = 10;
/// Stack frames shown per OOM in the table.
const FRAMES_SHOWN: usize = 12;

pub fn render(out: &mut String, oom: &OomReport) {
    let uncaught = oom.count - oom.caught;
    let _ = writeln!(
        out,
        "\nOut of memory: {} raised during the run ({} caught by the program{})",
        oom.count,
        oom.caught,
        if uncaught > 0 {
            ", the last one ended it"
        } else {
            ""
        }
    );
    for e in &oom.events {
        event(out, e);
    }
    if oom.events.len() < oom.count as usize {
        let _ = writeln!(
            out,
            "\n  ({} more were raised and caught; the first {} and the latest are recorded)",
            oom.count as usize - oom.events.len(),
            oom.events.len().saturating_sub(1)
        );
    }
    if !oom.suggestions.is_empty() {
        let _ = writeln!(out, "\nSuggestions, largest saving first:");
        for (i, s) in oom.suggestions.iter().enumerate() {
            let amount = match (s.kind.as_str(), s.saving_bytes) {
                ("smaller_batch", Some(b)) => format!("[short by {}] ", units::bytes(b)),
                (_, Some(b)) => format!("[saves ≈ {}] ", units::bytes(b)),
                (_, None) => String::new(),
            };
            let _ = writeln!(out, "  {}. {amount}{}", i + 1, s.text);
        }
    }
}

fn event(out: &mut String, e: &OomEvent) {
    let device = e.device.map(|d| format!("cuda:{d}")).unwrap_or("?".into());
    let at = e
        .line
        .as_ref()
        .map(|l| format!("{}:{} in {}", l.file, l.line, l.function))
        .unwrap_or_else(|| "no frame of your code on the stack".into());
    let _ = writeln!(
        out,
        "\n#{} · {} · {device} · at {at}",
        e.index,
        if e.caught { "caught" } else { "not caught" }
    );
    if let Some(l) = &e.line {
        let _ = writeln!(out, "  {:>5}  {}", l.line, l.source);
    }
    if let Some(m) = &e.message {
        // Torch's first two sentences (what was asked for, what the device had); YAML/JSON
        // keep the whole line.
        let cut = m
            .match_indices(". ")
            .nth(1)
            .map(|(i, _)| i + 1)
            .unwrap_or(m.len());
        let _ = writeln!(out, "  {}", &m[..cut]);
    }
    if e.thread == "autograd" {
        let _ = writeln!(
            out,
            "  raised on one of autograd's threads (backward); the stack is the thread's that waited in backward()"
        );
    }
    let source = if e.source == "allocator" {
        "read from the allocator when it raised"
    } else {
        "from torch's message, rounded as it prints them"
    };
    let b = |v: Option<i64>| v.map(units::bytes).unwrap_or_else(|| "-".into());
    let _ = writeln!(out, "  numbers {source}:");
    row(
        out,
        "requested",
        b(e.requested_bytes),
        "the allocation that failed",
    );
    row(out, "device total", b(e.device_total_bytes), "capacity");
    if let Some(cap) = e.process_cap_bytes {
        row(
            out,
            "process cap",
            units::bytes(cap),
            "set_per_process_memory_fraction, on reserved bytes",
        );
    }
    row(out, "device free", b(e.device_free_bytes), "");
    row(
        out,
        "allocated",
        b(e.allocated_bytes),
        "allocated_bytes.all.current",
    );
    row(
        out,
        "reserved",
        b(e.reserved_bytes),
        "reserved_bytes.all.current",
    );
    let fragmentation_note = match (e.largest_free_block_bytes, e.expandable_segments) {
        (Some(l), false) => format!(
            "reserved − allocated; largest free block {}",
            units::bytes(l)
        ),
        (Some(l), true) => format!(
            "reserved − allocated; largest free block {}; expandable segments on",
            units::bytes(l)
        ),
        (None, _) => "reserved − allocated".into(),
    };
    row(
        out,
        "fragmentation",
        b(e.fragmentation_bytes),
        &fragmentation_note,
    );
    if !e.modules_active.is_empty() {
        let _ = writeln!(out, "  modules running: {}", e.modules_active.join(" › "));
    }
    if !e.stack.is_empty() {
        let _ = writeln!(out, "  stack, innermost first (* your code):");
        for f in e.stack.iter().take(FRAMES_SHOWN) {
            let _ = writeln!(
                out,
                "    {} {}:{} {}",
                if f.user { "*" } else { " " },
                crate::model::profile::file_name(&f.file),
                f.line,
                f.function
            );
        }
        if e.stack.len() > FRAMES_SHOWN {
            let _ = writeln!(out, "      … {} outer frames", e.stack.len() - FRAMES_SHOWN);
        }
    }
    if let Some(inv) = &e.tensors {
        let mut shown = inv.clone();
        shown.unlisted_storages += shown.tensors.len().saturating_sub(TENSORS_SHOWN) as u64;
        shown.tensors.truncate(TENSORS_SHOWN);
        shown.when = format!("OOM #{}", e.index);
        super::tensors::render(out, std::slice::from_ref(&shown));
    }
}

fn row(out: &mut String, label: &str, amount: String, note: &str) {
    if note.is_empty() {
        let _ = writeln!(out, "  {label:<16} {amount:>12}");
    } else {
        let _ = writeln!(out, "  {label:<16} {amount:>12}  ({note})");
    }
}
