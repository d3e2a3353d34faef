//! The Peak section of the table: the run's (or a function's) highest allocated bytes, where it
//! was reached, the live bytes by the line that allocated them (largest first, summing to the
//! peak), and the next `-f` to run.
use super::fit::{contents_column, cut};
use super::style::{fitted_columns, left_out_note};
use crate::model::peak::{largest_first, DeviceSplit, Peak, Place};
use crate::model::units;
use std::collections::BTreeMap;
use std::fmt::Write;

/// What the peak is made of, largest first, on one line (text: a terminal wraps it); `other`
/// (what no rule named) always said. Nothing for a report from before the categories.
fn categories_line(out: &mut String, peak: &Peak) {
    let mut text = categories_text(&peak.categories, peak.allocated_bytes);
    if text.is_empty() {
        return;
    }
    if peak.unseen_bytes != 0 {
        let _ = write!(
            text,
            ", live from before {} ({})",
            units::bytes(peak.unseen_bytes),
            share(peak.unseen_bytes, peak.allocated_bytes)
        );
    }
    let _ = writeln!(out, "what it is: {text}");
}

/// `activations 8.01 MiB (35.6%), ..., other 0 B (0.0%)`: `categories` of a peak of `peak`
/// bytes, largest first, `other` last and always; empty when there are none.
pub fn categories_text(categories: &BTreeMap<String, i64>, peak: i64) -> String {
    if categories.is_empty() {
        return String::new();
    }
    let part = |name: &str, bytes: i64| {
        format!(
            "{} {} ({})",
            name.replace('_', " "),
            units::bytes(bytes),
            share(bytes, peak)
        )
    };
    let mut parts: Vec<String> = largest_first(categories)
        .into_iter()
        .filter(|(name, _)| *name != "other")
        .map(|(name, bytes)| part(name, bytes))
        .collect();
    parts.push(part("other", categories.get("other").copied().unwrap_or(0)));
    parts.join(", ")
}

/// The whole device at the peak, from the driver's count down, on one line.
pub fn device_line(out: &mut String, device: &DeviceSplit) {
    let b = units::bytes;
    match device {
        DeviceSplit::Cuda(d) => {
            let whose = if d.driver_source == "nvml_process" {
                "this process, as nvidia-smi counts it"
            } else {
                "the device's used memory, every process's"
            };
            let _ = writeln!(
                out,
                "device at the peak: {} ({whose}) = CUDA context {} + outside torch's allocator {} + \
                 reserved {} (allocated {}, cached {}; free pieces of split segments peaked at {})",
                b(d.process_bytes),
                b(d.context_bytes),
                b(d.outside_allocator_bytes),
                b(d.reserved_bytes),
                b(d.allocated_bytes),
                b(d.cached_bytes),
                b(d.inactive_split_peak_bytes),
            );
        }
        DeviceSplit::Cpu(h) => {
            let _ = writeln!(
                out,
                "host: resident peak {} = tensors at the peak {} + the rest {} (the interpreter, \
                 libraries, the C allocator's cache)",
                b(h.rss_peak_bytes),
                b(h.tensor_bytes),
                b(h.other_bytes),
            );
        }
    }
}

/// Rows a function's peak shows in the table (the run's shows every listed site).
pub const FUNCTION_ROWS: usize = 5;
/// The least of the sites' text worth keeping on a terminal before columns make way.
const MIN_PEAK_SOURCE: usize = 24;

/// How the run that made a report is run again, for the next command it suggests.
pub enum Rerun<'a> {
    /// `memprof run` of this script (its label).
    Script(&'a str),
    /// An in-process session (`memprof.profile`, the magics, the pytest plugin).
    InProcess,
    /// `memprof attach` of this process.
    Attach(u32),
}

/// Writes `peak` under `title`; at most `rows` sites, the rest summed in one row; the table cut
/// to `width` when given (a terminal). `rerun`: how the next command is written (None: not
/// offered).
pub fn render(
    out: &mut String,
    title: &str,
    peak: &Peak,
    rows: usize,
    width: Option<usize>,
    rerun: Option<Rerun>,
) {
    // The CPU has no reserve: its record's reserved bytes are the allocated ones.
    let reserved = if peak.reserved_bytes > peak.allocated_bytes {
        format!(
            ", {} reserved at that moment",
            units::bytes(peak.reserved_bytes)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\n{title}: {} allocated (allocated_bytes.all.peak){reserved}",
        units::bytes(peak.allocated_bytes),
    );
    let r = &peak.reached;
    let compiled = if r.compiled {
        " (a compiled graph's buffer, at its FX node's line)"
    } else {
        ""
    };
    // Text lines (no leading space): the report wraps them to a terminal's width.
    match (&r.site, r.in_backward) {
        (Some(site), true) => {
            let _ = writeln!(
                out,
                "reached in the backward run by {}{compiled}",
                place(site)
            );
        }
        (Some(site), false) => {
            let _ = writeln!(out, "reached at {}{compiled}", place(site));
        }
        (None, _) if r.allocation == 0 || r.site_allocation == 0 => {
            let _ = writeln!(out, "reached when a call started, before it allocated");
        }
        (None, _) => {
            let _ = writeln!(out, "reached by an allocation with no Python frame");
        }
    }
    if let Some(context) = &r.context {
        let _ = writeln!(out, "from {}", place(context));
    }
    if r.site_allocation > 0 {
        // The time stays in the YAML: a table is the same for the same run.
        let _ = writeln!(
            out,
            "(allocation {} on the device, the {} of that line)",
            r.allocation,
            ordinal(r.site_allocation),
        );
    }
    categories_line(out, peak);
    if let Some(device) = &peak.device {
        device_line(out, device);
    }
    out.push('\n');
    let mut lines: Vec<Vec<String>> = Vec::new();
    let mut row = |bytes: String,
                   share: String,
                   blocks: String,
                   category: String,
                   site: String,
                   text: String| {
        lines.push(vec![bytes, share, blocks, category, site, text]);
    };
    let shown = peak.sites.len().min(rows);
    let mixed = peak.sites[..shown].iter().any(|s| s.is_mixed());
    for s in &peak.sites[..shown] {
        row(
            units::bytes(s.bytes),
            format!("{:.1}%", s.share),
            s.blocks.to_string(),
            format!(
                "{}{}",
                s.main_category().replace('_', " "),
                if s.is_mixed() { "*" } else { "" }
            ),
            s.at.label(),
            s.at.place.source.clone(),
        );
        if let Some(c) = &s.at.context {
            row(
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                format!("  from {}", c.label()),
                c.source.clone(),
            );
        }
    }
    let hidden = &peak.sites[shown..];
    let (more_sites, more_bytes, more_blocks) = peak
        .other_sites
        .as_ref()
        .map_or((0, 0, 0), |o| (o.sites, o.bytes, o.blocks));
    let more_sites = more_sites + hidden.len() as u64;
    let more_bytes = more_bytes + hidden.iter().map(|s| s.bytes).sum::<i64>();
    let more_blocks = more_blocks + hidden.iter().map(|s| s.blocks).sum::<u64>();
    if more_sites > 0 {
        row(
            units::bytes(more_bytes),
            share(more_bytes, peak.allocated_bytes),
            more_blocks.to_string(),
            String::new(),
            format!("({more_sites} more sites)"),
            String::new(),
        );
    }
    if peak.unseen_bytes != 0 {
        row(
            units::bytes(peak.unseen_bytes),
            share(peak.unseen_bytes, peak.allocated_bytes),
            String::new(),
            String::new(),
            "(live from before)".into(),
            "allocated before measuring started (an earlier cell's or test's tensors, what a \
             program held when memprof attached), or on a thread without memprof's reporter"
                .into(),
        );
    }
    let blocks: u64 = peak.sites.iter().map(|s| s.blocks).sum::<u64>()
        + peak.other_sites.as_ref().map_or(0, |o| o.blocks);
    row(
        units::bytes(peak.parts_sum()),
        share(peak.parts_sum(), peak.allocated_bytes),
        blocks.to_string(),
        String::new(),
        "= the peak".into(),
        String::new(),
    );
    let header: Vec<String> = [
        "Bytes",
        "Share",
        "Blocks",
        "Category",
        "Site",
        "Line Contents",
    ]
    .map(String::from)
    .to_vec();
    // A narrow terminal loses Blocks, then Share, before the site's text gets too short to
    // read; the category (what the bytes are) and the site stay.
    let (text, left_out) = fitted_columns(&header, &lines, &[0, 1, 2], &[2, 1], |text| {
        width
            .is_none_or(|w| contents_column(text).is_some_and(|start| start + MIN_PEAK_SOURCE <= w))
    });
    match width {
        // Every line at the edge: the site's text is the one to lose.
        Some(w) => {
            text.lines().for_each(|l| {
                let _ = writeln!(out, "{}", cut(l, w));
            });
            left_out_note(
                out,
                w,
                &left_out,
                "the report's YAML/JSON (-o FILE) has them",
            );
        }
        None => out.push_str(&text),
    }
    if mixed {
        let _ = writeln!(
            out,
            "* more than one category: the largest shown; the report's YAML/JSON (-o FILE) has every part"
        );
    }
    if peak.cuda_graph_replays > 0 {
        let _ = writeln!(
            out,
            "CUDA graphs were replayed {} time{}: a replay allocates nothing (its graph's memory is its private pool's, cuda_graph_pool)",
            peak.cuda_graph_replays,
            if peak.cuda_graph_replays == 1 { "" } else { "s" }
        );
    }
    let offers = !peak.next_targets.is_empty() || peak.next_modules;
    if let (Some(rerun), true) = (rerun, offers) {
        let mut flags: Vec<String> = peak
            .next_targets
            .iter()
            .map(|t| {
                if t.contains(['<', ' ', '(', ')']) {
                    format!("-f '{t}'")
                } else {
                    format!("-f {t}")
                }
            })
            .collect();
        if peak.next_modules {
            flags.insert(0, "--modules".into());
        }
        match rerun {
            Rerun::InProcess => {
                let mut names: Vec<String> =
                    peak.next_targets.iter().map(|t| format!("{t:?}")).collect();
                if peak.next_modules {
                    names.push("modules=True".into());
                }
                let _ = writeln!(
                    out,
                    "\nline by line, next: memprof.profile({}) (or %memprof {})",
                    names.join(", "),
                    flags.join(" ")
                );
            }
            Rerun::Attach(pid) => {
                let _ = writeln!(
                    out,
                    "\nline by line, next: memprof attach {} {pid}",
                    flags.join(" ")
                );
            }
            Rerun::Script(script) => {
                let _ = writeln!(
                    out,
                    "\nline by line, next: memprof run {} {script}",
                    flags.join(" ")
                );
            }
        }
    }
}

fn share(bytes: i64, of: i64) -> String {
    if of > 0 {
        format!("{:.1}%", bytes as f64 * 100.0 / of as f64)
    } else {
        String::new()
    }
}

fn place(p: &Place) -> String {
    let at = p.label();
    if p.source.is_empty() {
        at
    } else {
        format!("{at}: {}", p.source)
    }
}

/// 1st, 2nd, 3rd, 4th, 11th, 21st...
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_read_as_english() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 102, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            got,
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "102nd", "111th"]
        );
    }
}
