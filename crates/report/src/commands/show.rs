//! `memprof show FILE...`: a saved report printed again (several ranks' files: merged).
use super::files;
use crate::analysis::merge;
use crate::cli::ShowArgs;
use crate::error::Result;
use crate::model::saved::Saved;
use crate::output::{self, terminal};
use crate::render;

/// `stats`: the `--stat` columns written before the subcommand (`memprof --stat K show`).
pub fn show(stats: &[String], args: ShowArgs) -> Result<i32> {
    let stats: Vec<String> = stats.iter().chain(&args.stats).cloned().collect();
    let width = terminal::width();
    if let [file] = args.files.as_slice() {
        if !stats.is_empty() {
            return Err(crate::error::Error::usage(
                "--stat chooses the columns of several reports merged; one report is shown with \
                 the stats it measured",
            )
            .hint("measure other stats with `memprof run --stat KEY`"));
        }
        let text = match files::read_report(file)? {
            Saved::Run(p) => render::render_printed(&p, args.format, width, false),
            Saved::Merged(m) => render::merged::render(&m, args.format, None),
        };
        output::print(&text);
    } else {
        let mut merged = merge::merge(files::read_run_reports(&args.files)?)?;
        merge::keep_stats(&mut merged, &stats)?;
        output::print(&render::merged::render(&merged, args.format, width));
    }
    Ok(0)
}
