//! `memprof run`: the options validated into one `RunConfig`, the session (the program run under
//! the recorder, the report built), then the finish: budgets checked, the report sent where it
//! goes (a file per rank, the terminal), the plot drawn.
use crate::analysis::budgets;
use crate::cli::config::{ReportDestination, RunConfig};
use crate::cli::{GlobalOptions, RunArgs};
use crate::error::{exit_code, Error, Result};
use crate::model::profile::Profile;
use crate::output::{self, file, ranks, terminal};
use crate::render::{self, Format};
use crate::{capture, session, torch};

/// Runs the program; returns the process exit code.
pub fn run(global: &GlobalOptions, args: RunArgs) -> Result<i32> {
    let config = RunConfig::new(global, args, torch::cuda_device_count())?;
    if matches!(config.report.printed, Some(f) if f != Format::Table) && output::reserve_stdout() {
        output::note(
            "the report goes to standard output in a machine format, so the program's standard \
             output goes to standard error (-o FILE keeps both where they were)",
        );
    }
    install_emergency_report(config.clone());
    install_report_so_far(config.clone());
    super::answer::start(&config);
    let live = super::live::start(&config)?;
    let finished = session::run(&config);
    super::live::stop(live);
    super::answer::stop();
    let finished = finished?;
    if let Some(simulation) = &config.simulate {
        return Ok(super::simulated::finish(
            &config,
            simulation,
            finished.exit_code,
        ));
    }
    Ok(finish(&config, finished.profile, finished.exit_code))
}

/// Checks the budgets, sends the report and draws the plot; the exit code: the script's own
/// failure first, then a budget, then a report or plot that could not be written.
fn finish(config: &RunConfig, mut profile: Profile, mut exit_code: i32) -> i32 {
    if capture::children::is_child() {
        // A forked copy of the run that came back here (os.fork without os._exit): its report
        // goes to the parent, which prints the run's.
        session::children::write_child_report(profile);
        return exit_code;
    }
    session::children::collect(&mut profile, config);
    if !config.budgets.is_empty() {
        let results = budgets::check(&profile, &config.budgets);
        let broken: Vec<&str> = results
            .iter()
            .filter(|r| !r.exceeded.is_empty())
            .map(|r| r.spec.as_str())
            .collect();
        let unchecked: Vec<&str> = results
            .iter()
            .filter(|r| r.lines_checked == Some(0))
            .map(|r| r.spec.as_str())
            .collect();
        if !broken.is_empty() {
            output::note(&format!(
                "budget exceeded: --max {} (the report marks the lines)",
                broken.join(", --max ")
            ));
        }
        if !unchecked.is_empty() {
            // A gate that checked nothing must not pass: a misspelt -f or function name.
            output::note(&format!(
                "budget checked nothing: --max {} (no measured line of the function it names; \
                 check -f and the function name)",
                unchecked.join(", --max ")
            ));
        }
        if (!broken.is_empty() || !unchecked.is_empty()) && exit_code == 0 {
            exit_code = exit_code::BUDGET_EXCEEDED;
        }
        profile.budgets = Some(results);
    }
    let to = &config.report;
    if let Some(text) = &to.rank_note {
        output::note(text);
    }
    if let Err(e) = capture::interrupt::write_final_report(|| emit(&profile, to)) {
        eprintln!("{e}");
        if exit_code == 0 {
            exit_code = e.code;
        }
    }
    if let Some(plan) = &to.gather {
        session::gather::gather(&render::render(&profile, to.file_format), config, plan);
    }
    if let Some(path) = &config.plot {
        let reports = [(String::new(), profile)];
        // The report is out already; a plot that fails says why, and a run that otherwise
        // succeeded exits non-zero (a CI step that asked for a picture must not pass without one).
        if let Err(e) =
            memprof_report::commands::plot::draw(&render::plot::sources(&reports), path, "--plot")
        {
            eprintln!("{e}");
            if exit_code == 0 {
                exit_code = e.code;
            }
        }
    }
    if to.default_file && config.process.rank == 0 {
        let ext = to.file_format.extension();
        output::note(&format!(
            "each of the {} ranks wrote its report (memprof.rank<N>.{ext}); see them side by side \
             with `memprof merge memprof.rank*.{ext}`",
            config.process.world_size
        ));
    }
    exit_code
}

/// Sends the report where it goes. A file that cannot be written (the disk filled, the
/// directory became read-only during the run) never loses the report: it goes to a file in the
/// temporary directory, or failing that to standard error, and the error says where.
fn emit(profile: &Profile, to: &ReportDestination) -> Result<()> {
    let mut failed = None;
    if let Some(path) = &to.output {
        let text = render::render(profile, to.file_format);
        if let Err(e) = file::write_atomically(path, &text, file::Written::Report) {
            failed = Some(keep_elsewhere(e, &text, to.file_format));
        } else {
            note_written(profile, path);
        }
    }
    if let Some(format) = to.printed {
        output::print(&render::render_printed(
            profile,
            format,
            terminal::width(),
            to.default_columns,
        ));
    }
    failed.map_or(Ok(()), Err)
}

/// The report that could not go to its file, kept elsewhere; the error to end with.
fn keep_elsewhere(e: Error, text: &str, format: Format) -> Error {
    let fallback = std::env::temp_dir().join(format!(
        "memprof-report.{}.{}",
        std::process::id(),
        match format {
            Format::Table => "txt",
            other => other.extension(),
        }
    ));
    match std::fs::write(&fallback, text) {
        Ok(()) => e.hint(format!(
            "the report was written to {} instead",
            fallback.display()
        )),
        Err(_) => {
            let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
            e.hint("the report was written to standard error instead (above)")
        }
    }
}

fn note_written(profile: &Profile, path: &std::path::Path) {
    let rank = &profile.metadata.process;
    if ranks::is_multi(rank) {
        output::note(&format!(
            "rank {} report written to {}",
            rank.rank,
            path.display()
        ));
    } else {
        output::note(&format!("report written to {}", path.display()));
    }
}

/// What `@memprof.profile()` reads after each call under the command: the run's report so far.
fn install_report_so_far(config: RunConfig) {
    capture::so_far::set(Box::new(move || {
        let ending = capture::interrupt::Ending {
            status: "running",
            exit_code: 0,
            warning: "the report of a run still going: what it measured so far".into(),
        };
        session::report_while_running(&ending, &config).map(|p| render::render(&p, Format::Json))
    }));
}

/// What a second Ctrl-C, SIGTERM or `os._exit` writes: the session's report so far with the
/// children that reported (in a forked child, the child's, into the children's folder). The
/// children's folder goes either way: an abrupt ending must not leave it in the temporary
/// directory.
fn install_emergency_report(config: RunConfig) {
    capture::interrupt::set_emergency_report(Box::new(move |ending| {
        if capture::children::is_child() {
            session::children::write_child_emergency_report(ending, &config);
            return;
        }
        if let Some(mut profile) = session::report_so_far(ending, &config) {
            // The children that reported by now are the run's too; their folder goes.
            session::children::collect(&mut profile, &config);
            if let Err(e) = emit(&profile, &config.report) {
                eprintln!("{e}");
            }
        }
        capture::children::clean_up();
    }));
}
