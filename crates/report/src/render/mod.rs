//! Rendering: a run's report, a merged report and a diff as a table (line_profiler's shape),
//! YAML or JSON, and reports as pictures (plot/). Reads the model only; writes nothing anywhere:
//! callers print or write the text. Uses `model`.
pub mod budgets;
mod children;
mod compiled;
pub mod diff;
pub mod fit;
mod growth;
pub mod html;
pub mod live;
pub mod merged;
mod merged_summary;
mod modules;
mod oom;
mod peak;
pub mod plot;
pub mod prediction;
pub mod report;
pub mod style;
mod table;
mod tensors;

use crate::model::profile::Profile;

/// The formats memprof writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Yaml,
    Json,
    /// One self-contained interactive page (a run's report, or ranks merged).
    Html,
}

impl Format {
    /// The format asked for, else the one `output`'s extension names (`.json`, `.yaml`, `.yml`),
    /// else the table: `-o infer.json` must write what `memprof show` reads.
    pub fn resolve(asked: Option<Format>, output: Option<&std::path::Path>) -> Format {
        let by_extension = output
            .and_then(|p| p.extension())
            .and_then(|e| e.to_str())
            .and_then(|e| match e.to_ascii_lowercase().as_str() {
                "json" => Some(Format::Json),
                "yaml" | "yml" => Some(Format::Yaml),
                "html" | "htm" => Some(Format::Html),
                _ => None,
            });
        asked.or(by_extension).unwrap_or(Format::Table)
    }

    /// The file name extension for reports in this format (JSON for tables, which cannot be
    /// merged).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Yaml => "yaml",
            Format::Html => "html",
            _ => "json",
        }
    }

    /// The format for a document other than a run's report or ranks merged (diffs,
    /// predictions), which has no HTML form: HTML is refused with the command that draws one.
    pub fn for_document(self, what: &str) -> crate::error::Result<Format> {
        if self == Format::Html {
            return Err(crate::error::Error::usage(format!(
                "{what} has no HTML form: the HTML report draws one run's report or ranks merged"
            ))
            .hint("write JSON or YAML (-o FILE.json), or draw a run's report with `memprof show RUN.json -o report.html`"));
        }
        Ok(self)
    }
}

/// The report in `format`.
pub fn render(profile: &Profile, format: Format) -> String {
    match format {
        Format::Html => html::render(profile),
        _ => render_with(profile, format, report::render),
    }
}

/// The report as printed on standard output: a table is fitted to `terminal_width` when
/// standard output is a terminal (`may_drop_stats`: its stat columns are the defaults, which
/// may be left out when narrow); files and pipes (None) get it whole.
pub fn render_printed(
    profile: &Profile,
    format: Format,
    terminal_width: Option<usize>,
    may_drop_stats: bool,
) -> String {
    match (format, terminal_width) {
        (Format::Table, Some(width)) => report::render_fitted(
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
/// serde writes it, the table as `table` draws it. HTML is a run report's alone (`render`;
/// `Format::for_document` refuses it for the others before they get here): JSON otherwise.
pub fn render_with<T: serde::Serialize>(
    value: &T,
    format: Format,
    table: impl Fn(&T) -> String,
) -> String {
    match format {
        Format::Table => table(value),
        Format::Yaml => serde_yaml::to_string(value).expect("reports serialise"),
        Format::Json | Format::Html => {
            let mut s = serde_json::to_string_pretty(value).expect("reports serialise");
            s.push('\n');
            s
        }
    }
}
