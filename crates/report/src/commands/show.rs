//! `memprof show FILE...`: a saved report printed again (several ranks' files: merged).
use super::files;
use crate::analysis::merge;
use crate::cli::ShowArgs;
use crate::error::Result;
use crate::model::saved::Saved;
use crate::output::terminal;
use crate::render::{self, Format};

/// `stats`: the `--stat` columns written before the subcommand (`memprof --stat K show`).
pub fn show(stats: &[String], args: ShowArgs) -> Result<i32> {
    let stats: Vec<String> = stats.iter().chain(&args.stats).cloned().collect();
    let format = Format::resolve(args.format, args.output.as_deref());
    // A file gets the whole table; the terminal one fitted to it.
    let width = args.output.is_none().then(terminal::width).flatten();
    let text = if let [file] = args.files.as_slice() {
        if !stats.is_empty() {
            return Err(crate::error::Error::usage(
                "--stat chooses the columns of several reports merged; one report is shown with \
                 the stats it measured",
            )
            .hint("measure other stats with `memprof run --stat KEY`"));
        }
        match files::read_report(file)? {
            Saved::Run(p) => render::render_printed(&p, format, width, false),
            Saved::Merged(m) => {
                render::merged::render(&m, format.for_document("a merged report")?, None)
            }
        }
    } else {
        let format = format.for_document("a merged report (several reports shown at once)")?;
        let mut merged = merge::merge(files::read_run_reports(&args.files)?)?;
        merge::keep_stats(&mut merged, &stats)?;
        render::merged::render(&merged, format, width)
    };
    files::deliver(&text, args.output.as_deref(), "report")?;
    Ok(0)
}
