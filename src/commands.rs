//! The subcommands: `run`, `show`, `stats`, `completions`.
use crate::cli::{Cli, Command, Format, GlobalOptions, RunArgs};
use crate::error::Result;
use crate::profile::DeviceInfo;
use crate::python::runner::{self, Program};
use crate::recorder::{self, Recorder, Source};
use crate::{config, report, stats, torch};
use clap::CommandFactory;
use std::io::Write;

/// Runs the parsed command; returns the process exit code.
pub fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run(args) => run(&cli.global, args),
        Command::Show(args) => {
            let profile = report::load(&args.file)?;
            print(&report::render(&profile, args.format));
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

fn print(text: &str) {
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
    for d in stats::cpu_stats()
        .iter()
        .filter(|d| d.key == stats::HOST_RSS)
    {
        s.push_str(&format!("  {:width$}  {}\n", d.key, d.meaning));
    }
    s.push_str("\nCPU stats (--device cpu, or no GPU):\n");
    for d in stats::cpu_stats() {
        s.push_str(&format!("  {:width$}  {}\n", d.key, d.meaning));
    }
    s.push_str("\nPeaks are exact per line: allocated_bytes.all.peak and reserved_bytes.all.peak (CUDA) and all\n\
CPU peaks come from the allocator's own reports; any other CUDA peak makes memprof reset the\n\
device's peak stats at every traced line, and the report says so.\n");
    s
}

fn run(global: &GlobalOptions, args: RunArgs) -> Result<i32> {
    if let Some(path) = &args.output {
        report::check_writable(path)?;
    }
    if args.depth.is_some() && !args.modules && args.suggest_checkpoints.is_none() {
        return Err(
            crate::error::Error::usage("--depth shapes the module report, which is off")
                .hint("add --modules (or --suggest-checkpoints N)"),
        );
    }
    let source = config::resolve_device(global.device.as_deref(), torch::cuda_device_count())?;
    let columns = config::resolve_stats(&global.stats, source)?;
    let device_index = match source {
        Source::Cuda(i) => Some(i),
        Source::Cpu => None,
    };
    *recorder::RECORDER.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(Recorder::new(source, columns));
    let command_line: Vec<String> = std::env::args().collect();
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
    install_emergency_report(&args, device.clone(), command_line.clone());
    let program = Program {
        script: args.script.clone(),
        module: args.module,
        args: args.args.clone(),
        targets: args.functions.clone(),
        modules: args.modules || args.suggest_checkpoints.is_some(),
        tensors: args.tensors,
        checkpoints: args.suggest_checkpoints.is_some(),
    };
    let mut facts = runner::run(&program, device_index)?;
    let exit_code = facts.outcome.exit_code;
    let modules_only = args.modules || args.suggest_checkpoints.is_some();
    if args.functions.is_empty()
        && !modules_only
        && recorder::with(|r| r.functions.is_empty()).unwrap_or(true)
    {
        facts.warnings.push(
            "nothing was targeted: pass -f FUNCTION, or decorate functions with @profile".into(),
        );
    }
    if args.tensors && recorder::with(|r| r.functions.is_empty()).unwrap_or(true) {
        facts.warnings.push(
            "--tensors lists the live tensors when a targeted call ends, and nothing was targeted: \
             pass -f FUNCTION"
                .into(),
        );
    }
    let ctx = report::RunContext {
        torch_version: facts.torch_version,
        python_version: facts.python_version,
        device: DeviceInfo {
            name: facts.device_name.unwrap_or_else(|| device.kind.clone()),
            ..device
        },
        command_line,
        outcome: facts.outcome,
        warnings: facts.warnings,
    };
    let mut profile =
        recorder::with(|r| report::build(r, ctx)).expect("the recorder exists during a run");
    if let Some(json) = &facts.sections_json {
        let options = report::SectionOptions {
            depth: args.depth,
            checkpoints: args.suggest_checkpoints,
        };
        match report::read_sections(json, options) {
            Ok(sections) => {
                profile.modules = sections.modules;
                profile.tensors = sections.tensors;
                profile.warnings.extend(sections.warnings);
            }
            Err(warning) => profile.warnings.push(warning),
        }
    }
    emit(&profile, args.format, args.output.as_deref())?;
    Ok(exit_code)
}

fn emit(
    profile: &crate::profile::Profile,
    format: Format,
    output: Option<&std::path::Path>,
) -> Result<()> {
    let text = report::render(profile, format);
    match output {
        Some(path) => {
            report::write_atomically(path, &text)?;
            eprintln!("memprof: report written to {}", path.display());
        }
        None => print(&text),
    }
    Ok(())
}

/// A second Ctrl-C exits at once; this writes what the recorder holds, if it can get it.
fn install_emergency_report(args: &RunArgs, device: DeviceInfo, command_line: Vec<String>) {
    let format = args.format;
    let output = args.output.clone();
    crate::interrupt::set_emergency_report(Box::new(move || {
        let Ok(guard) = recorder::RECORDER.try_lock() else {
            return;
        };
        let Some(r) = guard.as_ref() else { return };
        let ctx = report::RunContext {
            torch_version: torch::linked_version(),
            python_version: String::new(),
            device: device.clone(),
            command_line: command_line.clone(),
            outcome: crate::profile::Outcome {
                status: "interrupted".into(),
                exit_code: 130,
                exception: None,
            },
            warnings: vec![
                "interrupted twice: this report was written without Python's help".into(),
            ],
        };
        let profile = report::build(r, ctx);
        let _ = emit(&profile, format, output.as_deref());
    }));
}
