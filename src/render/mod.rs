//! Rendering and writing reports: the table (line_profiler's shape), YAML and JSON, written to
//! standard output or to a file (`file.rs`); and reading a saved report back for `memprof show`.
pub(crate) mod fit;
mod modules;
mod oom;
pub mod plot;
pub(crate) mod table;
mod tensors;

pub(crate) use modules::kinds_in;

use crate::cli::Format;
use crate::error::{Error, Result};
use crate::model::profile::Profile;
use std::path::Path;

/// The file name without its directories (`train.py:29 (train_step)` for
/// `/long/path/train.py:29 (train_step)`): tables are wide.
pub(crate) fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map(|(_, f)| f).unwrap_or(path)
}

/// The report in `format`.
pub fn render(profile: &Profile, format: Format) -> String {
    render_with(profile, format, table::render)
}

/// The report as printed on standard output: a table is fitted to the terminal's width when
/// standard output is a terminal (`may_drop_stats`: its stat columns are the defaults, which
/// may be left out when narrow); files and pipes get it whole.
pub fn render_printed(profile: &Profile, format: Format, may_drop_stats: bool) -> String {
    match (format, crate::output::terminal::width()) {
        (Format::Table, Some(width)) => table::render_fitted(
            profile,
            Some(fit::Fit {
                width,
                may_drop_stats,
            }),
        ),
        _ => render(profile, format),
    }
}

/// Any saved document (a run's report, a merged one, a diff) in `format`: YAML and JSON as
/// serde writes it, the table as `table` draws it.
pub fn render_with<T: serde::Serialize>(
    value: &T,
    format: Format,
    table: impl Fn(&T) -> String,
) -> String {
    match format {
        Format::Table => table(value),
        Format::Yaml => serde_yaml::to_string(value).expect("reports serialise"),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(value).expect("reports serialise");
            s.push('\n');
            s
        }
    }
}

/// A saved report: one run's, or several ranks' merged.
pub enum Saved {
    Run(Box<Profile>),
    Merged(Box<crate::analysis::merge::Merged>),
}

/// Reads a run's report saved as YAML or JSON (not a merged one).
pub fn load(path: &Path) -> Result<Profile> {
    match load_any(path)? {
        Saved::Run(p) => Ok(*p),
        Saved::Merged(_) => Err(Error::usage(format!(
            "'{}' is a merged report; pass the ranks' own reports",
            path.display()
        ))
        .hint("`memprof show` renders a merged report")),
    }
}

/// Reads a saved report of either kind, told apart by its `schema`.
pub fn load_any(path: &Path) -> Result<Saved> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read '{}': {e}", path.display())))?;
    let json = text.trim_start().starts_with('{');
    let merged = text.contains(crate::analysis::merge::MERGED_SCHEMA);
    let parsed = match (json, merged) {
        (true, false) => serde_json::from_str(&text)
            .map(|p| Saved::Run(Box::new(p)))
            .map_err(|e| e.to_string()),
        (true, true) => serde_json::from_str(&text)
            .map(|m| Saved::Merged(Box::new(m)))
            .map_err(|e| e.to_string()),
        (false, false) => serde_yaml::from_str(&text)
            .map(|p| Saved::Run(Box::new(p)))
            .map_err(|e| e.to_string()),
        (false, true) => serde_yaml::from_str(&text)
            .map(|m| Saved::Merged(Box::new(m)))
            .map_err(|e| e.to_string()),
    };
    parsed.map_err(|e| {
        let first = e
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(120)
            .collect::<String>();
        Error::usage(format!(
            "'{}' is not a memprof report ({first})",
            path.display()
        ))
        .hint("pass a file written by `memprof run --format yaml|json -o FILE`")
    })
}

/// A saved report of either kind in `format`.
pub fn render_saved(saved: &Saved, format: Format) -> String {
    match saved {
        Saved::Run(p) => render_printed(p, format, false),
        Saved::Merged(m) => crate::analysis::merge::render(m, format),
    }
}
