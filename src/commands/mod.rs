//! The subcommands, one file each: `run`, `show`, `merge`, `diff`, `plot`, `stats`,
//! `completions`. The only place that reads and writes report files (files.rs). Uses every layer
//! below it: `cli`, `session`, `analysis`, `render`, `output`, `model`.
mod diff;
mod files;
mod merge;
mod plot;
pub mod run;
mod show;
mod stats;

use crate::cli::{Cli, Command};
use crate::error::Result;
use clap::CommandFactory;

/// Runs the parsed command; returns the process exit code.
pub fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run(args) => run::run(&cli.global, args),
        Command::Show(args) => show::show(&cli.global, args),
        Command::Merge(args) => merge::merge(&cli.global, args),
        Command::Diff(args) => diff::diff(args),
        Command::Plot(args) => plot::plot(args),
        Command::Stats => {
            crate::output::print(&stats::listing());
            Ok(0)
        }
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "memprof", &mut out);
            crate::output::print(&String::from_utf8_lossy(&out));
            Ok(0)
        }
    }
}
