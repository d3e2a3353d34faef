//! One profiling session: the recorder installed, the program run under it (through `python`),
//! and the report model built from what both gathered. Uses `python`, `capture`, `analysis`,
//! `cli`'s `RunConfig`, `model`, `torch` and `error`.
pub mod build;
pub mod children;
mod compiled;
mod device_split;
pub mod gather;
mod growth;
pub mod live;
mod peak;
pub mod sections;
mod source;
mod timeline;
pub mod trace;

use crate::capture::interrupt::Ending;
use crate::capture::recorder::{self, Recorder};
use crate::cli::config::RunConfig;
use crate::error::Result;
use crate::model::profile::{DeviceInfo, Outcome, Profile, Schedule};
use crate::python::runner::{self, Program};
use crate::torch;
use build::RunContext;

/// A finished session: the report, and the exit code the script's run asks for.
pub struct Finished {
    pub profile: Profile,
    pub exit_code: i32,
}

const NOTHING_TARGETED: &str =
    "nothing was targeted: pass -f FUNCTION (-f '<module>' for the script's top-level lines), or \
     decorate functions with @profile";

/// Runs the program under the recorder and builds its report (without budgets: the caller
/// checks them).
pub fn run(config: &RunConfig) -> Result<Finished> {
    let mut program = program(config);
    runner::start(&program)?;
    begin(config)?;
    // The program's child processes are followed where a folder for their reports can be made
    // (else they run unmeasured, as before).
    if let Ok(dir) = crate::capture::children::arm() {
        program.options.follow_children = Some(dir.to_string_lossy().into_owned());
        children::install_child_report(config);
    }
    let facts = runner::run(&program)?;
    Ok(finish(config, facts))
}

/// The recorder installed for `config`, before anything runs (the command's run, or an
/// in-process session).
pub fn begin(config: &RunConfig) -> Result<()> {
    install_recorder(config);
    if config.collectives {
        torch::collectives::enable()?;
    }
    Ok(())
}

/// The report of what ran since `begin`, from the recorder and what Python gathered (`facts`).
pub fn finish(config: &RunConfig, mut facts: runner::RunFacts) -> Finished {
    if config.collectives {
        torch::collectives::disable();
    }
    let mut collected = facts.collected.take().map(|json| sections::parse(&json));
    let (target_warnings, device_name, roles) = match &mut collected {
        Some(Ok(c)) => (
            std::mem::take(&mut c.target_warnings),
            c.device_name.take(),
            std::mem::take(&mut c.tensor_roles),
        ),
        _ => (Vec::new(), None, None),
    };
    facts.warnings.splice(0..0, target_warnings);
    facts.warnings.extend(run_warnings(config));
    let exit_code = facts.outcome.exit_code;
    let ctx = context(config, facts, device_name);
    let mut profile = recorder::with(|r| {
        let compiled = crate::capture::peak::with(|t| compiled::lines_by_function(&r.functions, t))
            .unwrap_or_default();
        build::build(r, ctx, compiled)
    })
    .expect("the recorder exists during a run");
    add_peaks(&mut profile, roles, config.peak_sites, config.modules);
    if let Some(collected) = collected {
        add_sections(&mut profile, collected, config);
    }
    // A forked child that ends through here (a plain os.fork) leaves the run's files alone.
    if let (Some(path), false) = (&config.trace, crate::capture::children::is_child()) {
        if let Some(warning) = trace::write(path, &profile) {
            profile.warnings.push(warning);
        }
    }
    Finished { profile, exit_code }
}

/// The one recorder of the run, measuring what `config` chose.
fn install_recorder(config: &RunConfig) {
    crate::capture::peak::start();
    if config.trace.is_some() {
        crate::capture::peak::with(|t| t.record_trace(trace::MAX_EVENTS));
    }
    let options = recorder::Options {
        follow_device: config.follow_device,
        collectives: config.collectives,
        warmup: config.warmup,
        calls: config.calls,
        history: config.history.as_ref().map(|_| config.history_max_entries),
    };
    *recorder::RECORDER.lock().unwrap_or_else(|e| e.into_inner()) = Some(Recorder::new(
        config.source,
        config.columns.clone(),
        options,
    ));
    // CPU tensors live from before (an earlier in-process session's, a test's cached model) are
    // in the peak, as the CUDA allocator's own total has them.
    if config.source == crate::model::device::Source::Cpu {
        let before = recorder::with(|r| r.allocated_now()).unwrap_or(0);
        crate::capture::peak::with(|t| t.live_before(before));
    }
}

/// The run's peak and each targeted function's, from the tracker, what was still live named by
/// `roles` (the storages tensors held at the end, None: not looked for); with a peak, a run that
/// targeted nothing has its report (no warning).
fn add_peaks(
    profile: &mut Profile,
    roles: Option<Vec<(u64, String)>>,
    listed: usize,
    modules: bool,
) {
    let ids = recorder::with(|r| r.function_list()).unwrap_or_default();
    let targeted: Vec<String> = profile
        .functions
        .iter()
        .map(|f| f.qualname.clone())
        .collect();
    let mut namer = peak::Namer::new(listed, modules);
    crate::capture::peak::with(|t| {
        peak::name_remaining(t, roles);
        if let Some(c) = t.peak() {
            profile.peak = Some(namer.record(&c, t, &targeted, true));
        }
        let names: Vec<String> = ids.iter().map(|(q, _, _)| q.clone()).collect();
        profile.timeline = timeline::record(t, &mut namer, &names);
        profile.growth = growth::record(t, &mut namer, &names);
        for (id, (qualname, file, first_line)) in ids.iter().enumerate() {
            let Some(f) = profile.functions.iter_mut().find(|f| {
                &f.qualname == qualname && &f.file == file && f.first_line == *first_line
            }) else {
                continue;
            };
            if let Some(c) = t.function_peak(id as u64) {
                f.peak = Some(namer.record(&c, t, &targeted, false));
            }
        }
    });
    // The device's split reads the allocator's stats, which take the allocator's lock: never
    // under the tracker's, which an allocating thread holds the allocator's lock to take (a
    // snapshot while the program's threads allocate would deadlock).
    if let Some(peak) = profile.peak.as_mut() {
        peak.device = device_split::measure(peak);
    }
    if profile.peak.is_some() {
        profile.warnings.retain(|w| w != NOTHING_TARGETED);
    }
}

/// What the recorder's state says about the run as a whole: nothing targeted, or several
/// devices measured.
fn run_warnings(config: &RunConfig) -> Vec<String> {
    let mut warnings = Vec::new();
    let nothing_ran = recorder::with(|r| r.functions.is_empty()).unwrap_or(true);
    if config.program.targets.is_empty() && !config.modules && nothing_ran {
        warnings.push(NOTHING_TARGETED.into());
    }
    if config.tensors && nothing_ran {
        warnings.push(
            "--tensors lists the live tensors when a targeted call ends, and nothing was targeted: \
             pass -f FUNCTION"
                .into(),
        );
    }
    let devices = recorder::with(|r| r.devices().to_vec()).unwrap_or_default();
    if devices.len() > 1 {
        let names: Vec<String> = devices.iter().map(|d| format!("cuda:{d}")).collect();
        warnings.push(format!(
            "calls were measured on {} (the device the program used when each call started); \
             the report's device is the last",
            names.join(", ")
        ));
    }
    warnings
}

/// Everything about the run that the recorder does not know.
fn context(config: &RunConfig, facts: runner::RunFacts, device_name: Option<String>) -> RunContext {
    let device = device_info(config);
    RunContext {
        torch_version: facts.torch_version,
        python_version: facts.python_version,
        device: DeviceInfo {
            index: facts.device_index,
            name: device_name.unwrap_or_else(|| device.kind.clone()),
            ..device
        },
        command_line: config.command_line.clone(),
        outcome: facts.outcome,
        warnings: facts.warnings,
        process: config.process.clone(),
        script: Some(config.script_label()),
        schedule: config.scheduled().then_some(Schedule {
            warmup: config.warmup,
            calls: config.calls,
            stopped_early: facts.stopped_early,
        }),
        hook_events: facts.hook_events,
    }
}

/// The `--modules`, `--tensors`, `--history` and OOM sections, from what the bootstrap
/// collected; a document that could not be read leaves a warning instead.
fn add_sections(
    profile: &mut Profile,
    collected: std::result::Result<sections::Collected, String>,
    config: &RunConfig,
) {
    let options = sections::SectionOptions {
        depth: config.depth,
        checkpoints: config.suggest_checkpoints,
    };
    match collected.map(|c| sections::read(c, options)) {
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

/// What the Python side runs, and the options its bootstrap is installed with. The schedule's
/// policy for module calls is decided here: with -f they follow the targets' measured calls;
/// without, the module tracker counts each root module's calls itself.
pub fn program(config: &RunConfig) -> Program {
    let by_targets = !config.program.targets.is_empty();
    let index = config.source.cuda_index();
    Program {
        script: config.program.script.clone(),
        module: config.program.module,
        args: config.program.args.clone(),
        targets: config.program.targets.clone(),
        options: runner::Options {
            modules: config.modules,
            tensors: config.tensors,
            checkpoints: config.suggest_checkpoints.is_some(),
            collectives: config.collectives,
            device_type: config.source.kind().to_string(),
            device_index: index,
            module_schedule: config.scheduled() && !by_targets,
            follow_targets: config.scheduled() && by_targets,
            history: config
                .history
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
            history_max_entries: config.history_max_entries,
            in_process: false,
            // A simulated run's tensors are fake: nothing of the CPU's peak to name.
            peak_categories: config.simulate.is_none(),
            follow_children: None,
            child_argv: children::child_argv(config),
            script_label: config.script_label(),
            simulate_gpu: config
                .simulate
                .as_ref()
                .and_then(|s| serde_json::to_string(s.gpu).ok()),
            simulate_trace: config
                .simulate
                .as_ref()
                .map(|s| s.trace.to_string_lossy().into_owned()),
            simulate_ranks: config.simulate.as_ref().map_or(0, |s| s.ranks),
        },
    }
}

/// The device as the report names it before Python has said more (its name).
fn device_info(config: &RunConfig) -> DeviceInfo {
    DeviceInfo {
        kind: config.source.kind().to_string(),
        index: config.source.cuda_index(),
        name: String::new(),
    }
}

/// The running interpreter's version (`3.13.0`), read without the GIL: Py_GetVersion gives a
/// string made from constants.
fn python_version_now() -> String {
    // SAFETY: a NUL-terminated string that stays valid.
    let full = unsafe { std::ffi::CStr::from_ptr(pyo3::ffi::Py_GetVersion()) };
    let full = full.to_string_lossy();
    full.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// What a second Ctrl-C, SIGTERM or `os._exit` reports: what the recorder holds, when it can get
/// it (the hooks hold its lock only briefly, and never while waiting on anything). None when the
/// recorder stayed busy (said on standard error) or was never installed.
pub fn report_so_far(ending: &Ending, config: &RunConfig) -> Option<Profile> {
    let Some(guard) = crate::capture::interrupt::lock_within_two_seconds(&recorder::RECORDER)
    else {
        crate::output::note("the report was lost: the recorder stayed busy");
        return None;
    };
    let r = guard.as_ref()?;
    let versions = crate::python::runner::versions();
    let ctx = RunContext {
        torch_version: versions.map_or_else(torch::linked_version, |v| v.torch.clone()),
        python_version: versions.map_or_else(python_version_now, |v| v.python.clone()),
        device: device_info(config),
        command_line: config.command_line.clone(),
        outcome: Outcome {
            status: ending.status.into(),
            exit_code: ending.exit_code,
            exception: None,
        },
        warnings: vec![ending.warning.clone()],
        process: config.process.clone(),
        script: None,
        schedule: None,
        hook_events: crate::python::tracing::hook_events(),
    };
    Some(build::build(r, ctx, Vec::new()))
}

/// The report of the run so far while it goes on (the program asked for it, from a thread that
/// can wait): as `report_so_far`, with the peak so far and its sites, and the timeline.
pub fn report_while_running(ending: &Ending, config: &RunConfig) -> Option<Profile> {
    let mut profile = report_so_far(ending, config)?;
    add_peaks(&mut profile, None, config.peak_sites, config.modules);
    Some(profile)
}
