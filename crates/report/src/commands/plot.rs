//! `memprof plot REPORT... -o FILE` (and `run --plot`): reports drawn as SVG, PNG or HTML.
use super::files;
use crate::cli::PlotArgs;
use crate::error::Result;
use crate::model::profile::{file_name, Profile};
use crate::output;
use crate::output::file::{self, Written};
use crate::render::plot;
use std::path::Path;

pub fn plot(args: PlotArgs) -> Result<i32> {
    let reports = args
        .files
        .iter()
        .map(|f| {
            let name = f.to_string_lossy();
            Ok((file_name(&name).to_string(), files::read_run_report(f)?))
        })
        .collect::<Result<Vec<(String, Profile)>>>()?;
    draw(&plot::sources(&reports), &args.output, "-o")?;
    Ok(0)
}

/// Draws a plot into `path` (atomically) and tells the user where it went and what had no data.
/// `flag`: the option that named the file (`-o` of `memprof plot`, `run --plot`).
pub fn draw(sources: &[plot::Source<'_>], path: &Path, flag: &'static str) -> Result<()> {
    let kind = plot::kind_of(path)?;
    let what = Written::Plot { flag };
    file::check_writable(path, what)?;
    let (bytes, no_data) = plot::draw(sources, kind)?;
    file::write_bytes_atomically(path, &bytes, what)?;
    for n in no_data {
        output::note(&format!("plot: no data for {n}"));
    }
    output::note(&format!("plot written to {}", path.display()));
    Ok(())
}
