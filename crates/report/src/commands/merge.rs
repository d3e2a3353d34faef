//! `memprof merge FILE...`: the reports of a job's ranks side by side.
use super::files;
use crate::analysis::merge;
use crate::cli::MergeArgs;
use crate::error::Result;
use crate::output::terminal;
use crate::render::{self, Format};

/// `stats`: the `--stat` columns written before the subcommand (`memprof --stat K merge`).
pub fn merge(stats: &[String], args: MergeArgs) -> Result<i32> {
    let stats: Vec<String> = stats.iter().chain(&args.stats).cloned().collect();
    let format =
        Format::resolve(args.format, args.output.as_deref()).for_document("a merged report")?;
    let mut merged = merge::merge(files::read_run_reports(&args.files)?)?;
    merge::keep_stats(&mut merged, &stats)?;
    // A file gets every column; the terminal a table fitted to it.
    let width = args.output.is_none().then(terminal::width).flatten();
    let text = render::merged::render(&merged, format, width);
    files::deliver(&text, args.output.as_deref(), "merged report")?;
    Ok(0)
}
