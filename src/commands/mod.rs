//! The subcommands: `show`, `merge`, `diff`, `stats`, `completions`, and `run` (in run.rs); the
//! two ways of telling the user something (standard output, a note on standard error).
pub mod run;

use crate::analysis::{diff, merge};
use crate::cli::{Cli, Command, Format};
use crate::error::Result;
use crate::model::stats;
use crate::render as report;
use clap::CommandFactory;
use std::io::Write;

/// Runs the parsed command; returns the process exit code.
pub fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run(args) => crate::commands::run::run(&cli.global, args),
        Command::Show(args) => {
            if let [file] = args.files.as_slice() {
                print(&report::render_saved(&report::load_any(file)?, args.format));
            } else {
                let mut merged = merge::merge_files(&args.files)?;
                merge::keep_stats(&mut merged, &cli.global.stats)?;
                print(&merge::render_printed(&merged, args.format));
            }
            Ok(0)
        }
        Command::Merge(args) => {
            let format = Format::resolve(args.format, args.output.as_deref());
            let mut merged = merge::merge_files(&args.files)?;
            merge::keep_stats(&mut merged, &cli.global.stats)?;
            let text = match &args.output {
                Some(_) => merge::render(&merged, format),
                None => merge::render_printed(&merged, format),
            };
            deliver(&text, args.output.as_deref(), "merged report")?;
            Ok(0)
        }
        Command::Diff(args) => {
            let format = Format::resolve(args.format, args.output.as_deref());
            let mut d = diff::diff_files(&args.base, &args.new)?;
            let exceeded = diff::check_limits(&mut d, &args.max_increase)?;
            let text = match &args.output {
                Some(_) => diff::render(&d, format),
                None => diff::render_printed(&d, format),
            };
            deliver(&text, args.output.as_deref(), "diff")?;
            if exceeded {
                note("an increase went beyond --max-increase (the diff names the functions)");
                return Ok(crate::error::exit_code::INCREASE_EXCEEDED);
            }
            Ok(0)
        }
        Command::Plot(args) => {
            let reports = args
                .files
                .iter()
                .map(|f| {
                    let name = f.to_string_lossy();
                    Ok((report::file_name(&name).to_string(), report::load(f)?))
                })
                .collect::<Result<Vec<_>>>()?;
            draw_plot(&crate::render::plot::sources(&reports), &args.output)?;
            Ok(0)
        }
        Command::Stats => {
            print(&stats_listing());
            Ok(0)
        }
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "memprof", &mut out);
            print(&String::from_utf8_lossy(&out));
            Ok(0)
        }
    }
}

/// Draws a plot and tells the user where it went and what had no data.
pub fn draw_plot(
    sources: &[crate::render::plot::Source<'_>],
    output: &std::path::Path,
) -> Result<()> {
    for n in crate::render::plot::draw(sources, output)? {
        note(&format!("plot: no data for {n}"));
    }
    note(&format!("plot written to {}", output.display()));
    Ok(())
}

/// Writes `text` to `output` (atomically, saying so) or prints it.
fn deliver(text: &str, output: Option<&std::path::Path>, what: &str) -> Result<()> {
    match output {
        Some(path) => {
            crate::output::file::check_writable(path)?;
            crate::output::file::write_atomically(path, text)?;
            note(&format!("{what} written to {}", path.display()));
        }
        None => print(text),
    }
    Ok(())
}

/// A line for the user on standard error, in one write: ranks share a terminal.
pub fn note(text: &str) {
    let _ = std::io::stderr().write_all(format!("memprof: {text}\n").as_bytes());
}

pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`memprof show x | head`) is not an error.
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

fn stats_listing() -> String {
    let mut s = String::from("CUDA stats (the keys of torch.cuda.memory_stats(), torch 2.11):\n");
    let mut cuda = stats::cuda_stats();
    cuda.sort_by(|a, b| a.key.cmp(&b.key));
    let width = cuda.iter().map(|d| d.key.len()).max().unwrap_or(0);
    for d in &cuda {
        s.push_str(&format!("  {:width$}  {}\n", d.key, d.meaning));
    }
    s.push_str("\nOn every device:\n");
    for d in stats::cpu_stats().iter().filter(|d| stats::is_host(&d.key)) {
        s.push_str(&format!("  {:width$}  {}\n", d.key, d.meaning));
    }
    s.push_str("\nCPU stats (--device cpu, or no GPU):\n");
    for d in stats::cpu_stats()
        .iter()
        .filter(|d| !stats::is_host(&d.key))
    {
        s.push_str(&format!("  {:width$}  {}\n", d.key, d.meaning));
    }
    s.push_str("\nPeaks are exact per line: allocated_bytes.all.peak and reserved_bytes.all.peak (CUDA) and all\n\
CPU peaks come from the allocator's own reports; any other CUDA peak makes memprof reset the\n\
device's peak stats at every traced line, and the report says so.\n");
    s
}
