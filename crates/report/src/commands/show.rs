//! `memprof show FILE...`: a saved report printed again (several ranks' files: merged).
use super::files;
use crate::analysis::merge;
use crate::cli::{GlobalOptions, ShowArgs};
use crate::error::Result;
use crate::model::saved::Saved;
use crate::output::{self, terminal};
use crate::render;

pub fn show(global: &GlobalOptions, args: ShowArgs) -> Result<i32> {
    let width = terminal::width();
    if let [file] = args.files.as_slice() {
        let text = match files::read_report(file)? {
            Saved::Run(p) => render::render_printed(&p, args.format, width, false),
            Saved::Merged(m) => render::merged::render(&m, args.format, None),
        };
        output::print(&text);
    } else {
        let mut merged = merge::merge(files::read_run_reports(&args.files)?)?;
        merge::keep_stats(&mut merged, &global.stats)?;
        output::print(&render::merged::render(&merged, args.format, width));
    }
    Ok(0)
}
