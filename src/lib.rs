//! memprof's native core: the capture (recorder, allocator hooks, the libtorch shim), the report
//! model, its analyses and renderings, and the two front ends that share them: the `memprof`
//! command, which embeds CPython (`cli_main`), and the `memprof._native` Python extension,
//! loaded into an interpreter that is already running (`inprocess`).
mod analysis;
mod capture;
mod cli;
mod commands;
mod error;
mod inprocess;
mod model;
mod output;
mod python;
mod render;
mod session;
mod torch;

use clap::Parser;

/// The `memprof` command: parses, dispatches and turns errors into exit codes; never returns.
pub fn cli_main() -> ! {
    python::launcher::take_over();
    let (own, script_args) = cli::argv::from_env();
    let parsed = cli::Cli::try_parse_from(std::iter::once("memprof".to_string()).chain(own));
    let mut cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                error::exit_code::USAGE
            } else {
                0
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if let cli::Command::Run(run) = &mut cli.command {
        // The script's arguments, whatever they look like (clap saw none of them).
        run.args.extend(script_args);
    }
    let code = match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.code
        }
    };
    python::exit(code);
}
