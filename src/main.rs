//! memprof: line-level memory profiler for PyTorch programs. This binary reads and renders
//! reports itself (`show`, `merge`, `diff`, `plot`, `stats`, `completions`, `--help`: it links
//! neither libtorch nor libpython, so they start at once) and hands `run` to `memprof-embedded`
//! beside it, which embeds CPython and links the script's libtorch.
mod version;

use memprof_report::commands;
use memprof_report::error::{exit_code, Error, Result};
use std::os::unix::process::CommandExt;

/// The binary that runs programs, installed beside this one (cargo install, the build).
const EMBEDDED: &str = "memprof-embedded";

fn main() {
    let args = memprof_report::cli::argv::from_env();
    let cli = commands::parse(args, version::LONG);
    let code = match commands::dispatch(cli, |_, _| hand_over_run()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.code
        }
    };
    std::process::exit(code);
}

/// Replaces this process with `memprof-embedded`, given this process's arguments as they came;
/// returns only when it cannot start.
fn hand_over_run() -> Result<i32> {
    let me = std::env::current_exe()?;
    let embedded = me.with_file_name(EMBEDDED);
    let args = std::env::args_os().skip(1);
    let e = std::process::Command::new(&embedded).args(args).exec();
    Err(Error {
        message: format!("cannot start {}: {e}", embedded.display()),
        hint: Some(format!(
            "`memprof run` needs {EMBEDDED} beside memprof: build both (`cargo build`, `cargo \
             install --path .`); in a pip install, use the `memprof` command the wheel put on PATH"
        )),
        code: exit_code::USAGE,
    })
}
