//! memprof: line-level memory profiler for PyTorch programs. main only parses, dispatches and
//! turns errors into exit codes.
mod analysis;
mod capture;
mod cli;
mod commands;
mod error;
mod model;
mod output;
mod python;
mod render;
mod session;
mod torch;

use clap::Parser;

fn main() {
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
