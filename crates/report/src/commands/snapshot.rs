//! `memprof snapshot PID`: the report so far of a program that `memprof run` runs, asked for
//! through its socket (output/socket.rs); the program runs on.
use super::files;
use crate::cli::SnapshotArgs;
use crate::error::Result;
use crate::output::socket;
use crate::render::Format;

pub fn snapshot(args: SnapshotArgs) -> Result<i32> {
    let format = Format::resolve(args.format, args.output.as_deref());
    let name = match format {
        Format::Table => "table",
        Format::Json => "json",
        Format::Yaml => "yaml",
        Format::Html => "html",
    };
    let text = socket::ask(args.pid, name)?;
    files::deliver(&text, args.output.as_deref(), "snapshot")?;
    Ok(0)
}
