//! The subcommands that only read report files, one file each: `show`, `merge`, `diff`, `plot`,
//! `fit` (an allocation trace), `snapshot` and `live` (a running program's report and live view,
//! through its socket; the view itself, live_view.rs, also draws `memprof run --live`), `attach`
//! (a running Python 3.14 program measured from now on, through sys.remote_exec), `stats`,
//! `completions`; `run` is given by the caller (the native core's, or the binary's hand-over to
//! it). The only place that reads report files (files.rs). Uses `cli`, `analysis`, `render`,
//! `output`, `model`.
mod attach;
mod diff;
pub mod files;
pub mod fit;
pub(crate) mod live;
pub mod live_view;
mod merge;
pub mod plot;
mod show;
mod snapshot;
mod stats;

use crate::cli::{Cli, Command, GlobalOptions, RunArgs};
use crate::error::Result;
use clap::CommandFactory;

/// Runs the parsed command with `run` for `memprof run`; returns the process exit code.
pub fn dispatch(cli: Cli, run: impl FnOnce(&GlobalOptions, RunArgs) -> Result<i32>) -> Result<i32> {
    unused_options(&cli)?;
    match cli.command {
        Command::Run(args) => run(&cli.global.with(&args.measure), args),
        Command::Show(args) => show::show(&cli.global.stats, args),
        Command::Merge(args) => merge::merge(&cli.global.stats, args),
        Command::Diff(args) => diff::diff(args),
        Command::Plot(args) => plot::plot(args),
        Command::Fit(args) => fit::fit(args),
        Command::Snapshot(args) => snapshot::snapshot(args),
        Command::Live(args) => live::live(args),
        Command::Attach(args) => attach::attach(&cli.global.with(&args.measure), args),
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

/// `--device` or `--stat` written before a subcommand that would ignore it: a usage error, not
/// silence (after the subcommand, clap refuses them itself).
fn unused_options(cli: &Cli) -> Result<()> {
    let (name, reads_stats) = match &cli.command {
        Command::Run(_) | Command::Attach(_) | Command::Completions { .. } => return Ok(()),
        Command::Show(_) => ("show", true),
        Command::Merge(_) => ("merge", true),
        Command::Diff(_) => ("diff", false),
        Command::Plot(_) => ("plot", false),
        Command::Fit(_) => ("fit", false),
        Command::Snapshot(_) => ("snapshot", false),
        Command::Live(_) => ("live", false),
        Command::Stats => ("stats", false),
    };
    let (unused, hint) = if cli.global.device.is_some() {
        (
            "--device",
            "measure on a device with `memprof run --device D`",
        )
    } else if !cli.global.stats.is_empty() && !reads_stats {
        (
            "--stat",
            "choose the stats with `memprof run --stat KEY`, or a merged table's with `show`/`merge --stat KEY`",
        )
    } else {
        return Ok(());
    };
    Err(crate::error::Error::usage(format!(
        "{unused} means nothing to `memprof {name}`: it reads files written by an earlier run"
    ))
    .hint(hint))
}

/// The command line parsed as the `memprof` command parses it (`args`: without the program's
/// name): memprof's own options, then the script's arguments (whatever they look like) given to
/// `run`. Exits on a parse error (exit 2) or on --help/--version (exit 0), as clap does.
/// `long_version`: what `--version` says (the binary knows which Python `run` embeds).
pub fn parse(args: Vec<String>, long_version: &'static str) -> Cli {
    use clap::FromArgMatches;
    let (own, script_args) = crate::cli::argv::split(args);
    let parsed = Cli::command()
        .long_version(long_version)
        .try_get_matches_from(std::iter::once("memprof".to_string()).chain(own))
        .and_then(|m| Cli::from_arg_matches(&m));
    let mut cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                crate::error::exit_code::USAGE
            } else {
                0
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if let Command::Run(run) = &mut cli.command {
        // The script's arguments, whatever they look like (clap saw none of them).
        run.args.extend(script_args);
    }
    cli
}
