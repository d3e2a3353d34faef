//! `memprof diff BASE NEW`: what changed between two runs, and `--max-increase` gates.
use super::files;
use crate::analysis::diff;
use crate::cli::DiffArgs;
use crate::error::{exit_code, Result};
use crate::output::{self, terminal};
use crate::render::{self, Format};

pub fn diff(args: DiffArgs) -> Result<i32> {
    let format = Format::resolve(args.format, args.output.as_deref()).for_document("a diff")?;
    let (base, new) = (
        files::read_run_report(&args.base)?,
        files::read_run_report(&args.new)?,
    );
    let mut d = diff::diff(
        &base,
        &new,
        &args.base.display().to_string(),
        &args.new.display().to_string(),
    );
    let exceeded = diff::check_limits(&mut d, &args.max_increase)?;
    let width = args.output.is_none().then(terminal::width).flatten();
    files::deliver(
        &render::diff::render(&d, format, width),
        args.output.as_deref(),
        "diff",
    )?;
    if exceeded {
        output::note("an increase went beyond --max-increase (the diff names the functions)");
        return Ok(exit_code::INCREASE_EXCEEDED);
    }
    Ok(0)
}
