//! `memprof show FILE...`: a saved report printed again (several ranks' files: merged).
use super::files;
use crate::analysis::merge;
use crate::cli::ShowArgs;
use crate::error::Result;
use crate::model::merged::Merged;
use crate::model::saved::Saved;
use crate::output::terminal;
use crate::render::merged::RankDetail;
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
                merged_text(&m, format, None, args.output.as_deref(), &RankDetail::Auto)
            }
        }
    } else {
        let mut merged = merge::merge(files::read_rank_reports(&args.files)?)?;
        merge::keep_stats(&mut merged, &stats)?;
        merged_text(
            &merged,
            format,
            width,
            args.output.as_deref(),
            &RankDetail::Auto,
        )
    };
    files::deliver(&text, args.output.as_deref(), "report")?;
    Ok(0)
}

/// A merged report in `format`: the page for HTML (written to `output`'s folder, whose links
/// lead to the ranks' reports), else the summary (with `detail`'s ranks) and tables.
pub fn merged_text(
    m: &Merged,
    format: Format,
    width: Option<usize>,
    output: Option<&std::path::Path>,
    detail: &RankDetail,
) -> String {
    if format == Format::Html {
        let page_dir = output
            .and_then(std::path::Path::parent)
            .filter(|d| !d.as_os_str().is_empty());
        render::html::merged::render(m, page_dir)
    } else {
        render::merged::render(m, format, width, detail)
    }
}
