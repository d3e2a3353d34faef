//! Report files: reading saved reports (a run's, or merged) with one clear error for what is not
//! one, and writing a command's output to a file or to standard output.
use crate::error::{Error, Result};
use crate::model::profile::Profile;
use crate::model::saved::{self, Saved};
use crate::output;
use crate::output::file::{self, Written};
use std::path::{Path, PathBuf};

/// A file memprof saved (a report, a trace), as text; a file that cannot be read is a usage
/// error naming it.
pub fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read '{}': {e}", path.display())))
}

/// Reads a saved report of either kind, told apart by its `schema`.
pub fn read_report(path: &Path) -> Result<Saved> {
    let text = read_text(path)?;
    // A page written by `-o report.html` carries its report.
    let text = crate::render::html::embedded_report(&text).unwrap_or(&text);
    saved::parse(text).map_err(|e| not_a_report(path, &e))
}

fn not_a_report(path: &Path, parser_message: &str) -> Error {
    let first = parser_message
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
    .hint("pass a file written by `memprof run -o FILE` (.json, .yaml or .html)")
}

fn merged_given(path: &Path) -> Error {
    Error::usage(format!(
        "'{}' is a merged report; pass the ranks' own reports",
        path.display()
    ))
    .hint("`memprof show` renders a merged report")
}

/// Reads a run's report (not a merged one).
pub fn read_run_report(path: &Path) -> Result<Profile> {
    match read_report(path)? {
        Saved::Run(p) => Ok(*p),
        Saved::Merged(_) => Err(merged_given(path)),
    }
}

/// Reads the ranks' reports for merging, each with its file, on every core; what merging does
/// not use (the timeline, tensors, history) is skipped as it is parsed. The first file in
/// `files`' order that cannot be read is the error.
pub fn read_rank_reports(files: &[PathBuf]) -> Result<Vec<(PathBuf, Profile)>> {
    let read_one = |path: &PathBuf| -> Result<(PathBuf, Profile)> {
        let text = read_text(path)?;
        let text = crate::render::html::embedded_report(&text).unwrap_or(&text);
        match saved::parse_for_merge(text) {
            Ok(Some(p)) => Ok((path.clone(), p)),
            Ok(None) => Err(merged_given(path)),
            Err(e) => Err(not_a_report(path, &e)),
        }
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    let chunk = files.len().div_ceil(threads).max(1);
    let parts: Vec<Vec<Result<(PathBuf, Profile)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(read_one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a report reader does not panic"))
            .collect()
    });
    parts.into_iter().flatten().collect()
}

/// Writes `text` to `to` (atomically, saying so) or prints it.
pub fn deliver(text: &str, to: Option<&Path>, what: &str) -> Result<()> {
    match to {
        Some(path) => {
            file::check_writable(path, Written::Report)?;
            file::write_atomically(path, text, Written::Report)?;
            output::note(&format!("{what} written to {}", path.display()));
        }
        None => output::print(text),
    }
    Ok(())
}
