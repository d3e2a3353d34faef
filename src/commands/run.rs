//! `memprof run`: validates the options, runs the program under the recorder, builds the report
//! (sections, budgets, warnings) and sends it where it goes: a file per rank, the terminal.
use crate::analysis::budgets as budget;
use crate::capture::recorder::{self, Recorder, Source};
use crate::cli::config;
use crate::cli::{Format, GlobalOptions, RunArgs};
use crate::commands::{note, print};
use crate::error::Result;
use crate::model::profile::{DeviceInfo, Schedule};
use crate::model::stats;
use crate::output::ranks;
use crate::python::runner::{self, Program};
use crate::render as report;
use crate::torch;
use std::path::PathBuf;

/// Runs the program; returns the process exit code.
pub fn run(global: &GlobalOptions, args: RunArgs) -> Result<i32> {
    let process = ranks::this_process();
    let format = Format::resolve(args.format, args.output.as_deref());
    let (output, rank_note) =
        ranks::output_path(args.output.as_deref(), &process, file_extension(format))?;
    // Resolved now: a script that changes directory (Hydra does) must not move the report.
    let output = output.map(absolute).transpose()?;
    // Without -o, a multi-rank run still keeps every rank's report, as JSON or YAML for merging.
    let default_file = args.output.is_none() && output.is_some();
    let file_format = if default_file && format == Format::Table {
        Format::Json
    } else {
        format
    };
    let prints = !ranks::is_multi(&process) || process.rank == 0 || args.all_ranks;
    if let Some(path) = &output {
        crate::output::file::check_writable(path)?;
    }
    let history = side_file(args.history.as_deref(), &process, "pickle")?;
    if let Some(path) = &history {
        crate::output::file::check_writable(path)?;
        if args.history_max_entries == 0 {
            return Err(
                crate::error::Error::usage("--history-max-entries must be at least 1")
                    .hint("the default keeps the latest 100000 events"),
            );
        }
    }
    let plot = side_file(args.plot.as_deref(), &process, "svg")?;
    if let Some(path) = &plot {
        crate::render::plot::check_output(path)?;
    }
    if args.depth.is_some() && !args.modules && args.suggest_checkpoints.is_none() {
        return Err(
            crate::error::Error::usage("--depth shapes the module report, which is off")
                .hint("add --modules (or --suggest-checkpoints N)"),
        );
    }
    let source = config::resolve_device(global.device.as_deref(), torch::cuda_device_count())?;
    let mut columns = config::resolve_stats(&global.stats, source)?;
    let cuda = matches!(source, Source::Cuda(_));
    let budgets = budget::parse(&args.max, |key| {
        stats::stats_for(cuda).iter().any(|s| s.key == key)
    })?;
    // A budgeted stat is measured even when --stat did not choose it.
    for b in budgets.iter().filter(|b| !budget::is_delta(&b.key)) {
        if !columns.iter().any(|c| c.key == b.key) {
            columns.extend(config::resolve_stats(std::slice::from_ref(&b.key), source)?);
        }
    }
    let device_index = match source {
        Source::Cuda(i) => Some(i),
        Source::Cpu => None,
    };
    let scheduled = args.warmup > 0 || args.calls.is_some();
    let options = recorder::Options {
        follow_device: global.device.is_none(),
        collectives: args.collectives,
        warmup: args.warmup,
        calls: args.calls,
        history: history.as_ref().map(|_| args.history_max_entries),
    };
    *recorder::RECORDER.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(Recorder::new(source, columns, options));
    if args.collectives {
        torch::collectives::enable()?;
    }
    let command_line: Vec<String> = std::env::args().collect();
    let script = Some(if args.module {
        format!("-m {}", args.script.display())
    } else {
        args.script.display().to_string()
    });
    let device = DeviceInfo {
        kind: if device_index.is_some() {
            "cuda"
        } else {
            "cpu"
        }
        .to_string(),
        index: device_index,
        name: String::new(),
    };
    let emergency = Destination {
        output: output.clone(),
        format: file_format,
        printed: (prints && (output.is_none() || default_file)).then_some(format),
        default_columns: global.stats.is_empty(),
    };
    install_emergency_report(emergency.clone(), device.clone(), command_line.clone());
    let program = Program {
        script: args.script.clone(),
        module: args.module,
        args: args.args.clone(),
        targets: args.functions.clone(),
        modules: args.modules || args.suggest_checkpoints.is_some(),
        tensors: args.tensors,
        checkpoints: args.suggest_checkpoints.is_some(),
        collectives: args.collectives,
        warmup: args.warmup,
        calls: args.calls,
        history: history.clone(),
        history_max_entries: args.history_max_entries,
    };
    let mut facts = runner::run(&program, device_index)?;
    if args.collectives {
        torch::collectives::disable();
    }
    let exit_code = facts.outcome.exit_code;
    let modules_only = args.modules || args.suggest_checkpoints.is_some();
    if args.functions.is_empty()
        && !modules_only
        && recorder::with(|r| r.functions.is_empty()).unwrap_or(true)
    {
        facts.warnings.push(NOTHING_TARGETED.into());
    }
    if args.tensors && recorder::with(|r| r.functions.is_empty()).unwrap_or(true) {
        facts.warnings.push(
            "--tensors lists the live tensors when a targeted call ends, and nothing was targeted: \
             pass -f FUNCTION"
                .into(),
        );
    }
    let devices = recorder::with(|r| r.devices().to_vec()).unwrap_or_default();
    if devices.len() > 1 {
        let names: Vec<String> = devices.iter().map(|d| format!("cuda:{d}")).collect();
        facts.warnings.push(format!(
            "calls were measured on {} (the device the program used when each call started); \
             the report's device is the last",
            names.join(", ")
        ));
    }
    let ctx = crate::session::build::RunContext {
        torch_version: facts.torch_version,
        python_version: facts.python_version,
        device: DeviceInfo {
            index: facts.device_index,
            name: facts.device_name.unwrap_or_else(|| device.kind.clone()),
            ..device
        },
        command_line,
        outcome: facts.outcome,
        warnings: facts.warnings,
        process: process.clone(),
        script,
        schedule: scheduled.then_some(Schedule {
            warmup: args.warmup,
            calls: args.calls,
            stopped_early: facts.stopped_early,
        }),
        hook_events: facts.hook_events,
    };
    let mut profile = recorder::with(|r| crate::session::build::build(r, ctx))
        .expect("the recorder exists during a run");
    if let Some(json) = &facts.sections_json {
        let options = crate::session::sections::SectionOptions {
            depth: args.depth,
            checkpoints: args.suggest_checkpoints,
        };
        match crate::session::sections::read(json, options) {
            Ok(sections) => {
                profile.modules = sections.modules;
                profile.tensors = sections.tensors;
                profile.oom = sections.oom;
                profile.history = sections.history;
                if profile.oom.is_some() {
                    // The OOM report is what this run has to say; no target is no news then.
                    profile.warnings.retain(|w| w != NOTHING_TARGETED);
                }
                profile.warnings.extend(sections.warnings);
            }
            Err(warning) => profile.warnings.push(warning),
        }
    }
    let mut exit_code = exit_code;
    if !budgets.is_empty() {
        let results = budget::check(&profile, &budgets);
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
            note(&format!(
                "budget exceeded: --max {} (the report marks the lines)",
                broken.join(", --max ")
            ));
        }
        if !unchecked.is_empty() {
            // A gate that checked nothing must not pass: a misspelt -f or function name.
            note(&format!(
                "budget checked nothing: --max {} (no measured line of the function it names; \
                 check -f and the function name)",
                unchecked.join(", --max ")
            ));
        }
        if !broken.is_empty() || !unchecked.is_empty() {
            // The script's own failure comes first; a clean run that broke a budget exits 3.
            if exit_code == 0 {
                exit_code = crate::error::exit_code::BUDGET_EXCEEDED;
            }
        }
        profile.budgets = Some(results);
    }
    if let Some(text) = rank_note {
        note(&text);
    }
    if let Err(e) = crate::capture::interrupt::write_final_report(|| emit(&profile, &emergency)) {
        eprintln!("{e}");
        if exit_code == 0 {
            exit_code = e.code;
        }
    }
    if let Some(path) = &plot {
        let reports = [(String::new(), profile)];
        // The report is out already; a plot that fails says why, and a run that otherwise
        // succeeded exits non-zero (a CI step that asked for a picture must not pass without one).
        if let Err(e) = crate::commands::draw_plot(&crate::render::plot::sources(&reports), path) {
            eprintln!("{e}");
            if exit_code == 0 {
                exit_code = e.code;
            }
        }
    }
    if default_file && process.rank == 0 {
        let ext = file_extension(file_format);
        note(&format!(
            "each of the {} ranks wrote its report (memprof.rank<N>.{ext}); see them side by side \
             with `memprof merge memprof.rank*.{ext}`",
            process.world_size
        ));
    }
    Ok(exit_code)
}

const NOTHING_TARGETED: &str =
    "nothing was targeted: pass -f FUNCTION, or decorate functions with @profile";

/// A file written beside the report (`--history`, `--plot`), named as `-o` is (placeholders, the
/// rank inserted under several ranks); none when not asked for, whatever the ranks.
fn side_file(
    template: Option<&std::path::Path>,
    process: &crate::model::profile::ProcessInfo,
    extension: &str,
) -> Result<Option<PathBuf>> {
    match template {
        Some(t) => ranks::output_path(Some(t), process, extension)?
            .0
            .map(absolute)
            .transpose(),
        None => Ok(None),
    }
}

/// `path` from the directory memprof started in, whatever the script does with its own.
fn absolute(path: PathBuf) -> Result<PathBuf> {
    Ok(std::path::absolute(&path)?)
}

/// The file name extension for reports in `format` (JSON for tables, which cannot be merged).
fn file_extension(format: Format) -> &'static str {
    match format {
        Format::Yaml => "yaml",
        _ => "json",
    }
}

/// Where a run's report goes: a file (in `format`) and/or the terminal.
#[derive(Clone)]
struct Destination {
    output: Option<PathBuf>,
    format: Format,
    /// The format printed to standard output, if this process prints: without -o, or with a
    /// multi-rank run's default file; and in a multi-rank run only rank 0 (or --all-ranks).
    printed: Option<Format>,
    /// The stat columns are memprof's defaults (no --stat): a narrow terminal may leave some out.
    default_columns: bool,
}

/// Sends the report where it goes. A file that cannot be written (the disk filled, the
/// directory became read-only during the run) never loses the report: it goes to a file in the
/// temporary directory, or failing that to standard error, and the error says where.
fn emit(profile: &crate::model::profile::Profile, to: &Destination) -> Result<()> {
    let mut failed = None;
    if let Some(path) = &to.output {
        let text = report::render(profile, to.format);
        if let Err(e) = crate::output::file::write_atomically(path, &text) {
            failed = Some(keep_elsewhere(e, &text, to.format));
        } else {
            note_written(profile, path);
        }
    }
    if let Some(format) = to.printed {
        print(&report::render_printed(profile, format, to.default_columns));
    }
    failed.map_or(Ok(()), Err)
}

/// The report that could not go to its file, kept elsewhere; the error to end with.
fn keep_elsewhere(e: crate::error::Error, text: &str, format: Format) -> crate::error::Error {
    let fallback = std::env::temp_dir().join(format!(
        "memprof-report.{}.{}",
        std::process::id(),
        match format {
            Format::Table => "txt",
            other => file_extension(other),
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

fn note_written(profile: &crate::model::profile::Profile, path: &std::path::Path) {
    let rank = &profile.metadata.process;
    if ranks::is_multi(rank) {
        note(&format!(
            "rank {} report written to {}",
            rank.rank,
            path.display()
        ));
    } else {
        note(&format!("report written to {}", path.display()));
    }
}

/// What a second Ctrl-C, SIGTERM or `os._exit` writes: what the recorder holds, when it can get
/// it (the hooks hold its lock only briefly, and never while waiting on anything).
fn install_emergency_report(to: Destination, device: DeviceInfo, command_line: Vec<String>) {
    crate::capture::interrupt::set_emergency_report(Box::new(move |ending| {
        let Some(guard) = crate::capture::interrupt::lock_within_two_seconds(&recorder::RECORDER)
        else {
            crate::commands::note("the report was lost: the recorder stayed busy");
            return;
        };
        let Some(r) = guard.as_ref() else { return };
        let ctx = crate::session::build::RunContext {
            torch_version: torch::linked_version(),
            python_version: String::new(),
            device: device.clone(),
            command_line: command_line.clone(),
            outcome: crate::model::profile::Outcome {
                status: ending.status.into(),
                exit_code: ending.exit_code,
                exception: None,
            },
            warnings: vec![ending.warning.clone()],
            process: ranks::this_process(),
            script: None,
            schedule: None,
            hook_events: crate::python::hook_events(),
        };
        let profile = crate::session::build::build(r, ctx);
        if let Err(e) = emit(&profile, &to) {
            eprintln!("{e}");
        }
    }));
}
