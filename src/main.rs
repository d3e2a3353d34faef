//! memprof: line-level memory profiler for PyTorch programs. main only parses, dispatches and
//! turns errors into exit codes.
mod checkpoints;
mod cli;
mod commands;
mod config;
mod error;
mod host;
mod interrupt;
mod merge;
mod profile;
mod python;
mod ranks;
mod recorder;
mod report;
mod sampler;
mod stats;
mod torch;
mod units;

use clap::Parser;

fn main() {
    let cli = match cli::Cli::try_parse() {
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
    let code = match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.code
        }
    };
    python::exit(code);
}
