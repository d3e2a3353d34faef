//! `memprof run`'s command line turned into one validated `RunConfig`, once, before the script
//! starts: the device and stats, budgets, where the report and its side files go (resolved to
//! absolute paths and checked for writing), what prints, and what the program runs with.
use super::{GlobalOptions, RunArgs};
use crate::analysis::budgets::{self, Budget};
use crate::error::{Error, Result};
use crate::model::device::Source;
use crate::model::profile::{is_delta, ProcessInfo};
use crate::model::stats::{self, StatDef};
use crate::output::file::{self, Written};
use crate::output::ranks;
use crate::render::Format;
use std::path::{Path, PathBuf};

/// Everything `memprof run` does, decided.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// This process among a job's ranks.
    pub process: ProcessInfo,
    /// The device measured and the stats shown.
    pub source: Source,
    pub columns: Vec<StatDef>,
    /// No --device: follow the CUDA device the program uses.
    pub follow_device: bool,
    pub budgets: Vec<Budget>,
    pub report: ReportDestination,
    /// `--history`: the file (absolute) and how many events to keep.
    pub history: Option<PathBuf>,
    pub history_max_entries: u64,
    /// `--trace`: the file (absolute).
    pub trace: Option<PathBuf>,
    /// `--plot`: the file (absolute).
    pub plot: Option<PathBuf>,
    /// `--peak-sites`: how many sites the peak lists.
    pub peak_sites: usize,
    pub program: Program,
    /// `--modules` or `--suggest-checkpoints`.
    pub modules: bool,
    pub depth: Option<u32>,
    pub suggest_checkpoints: Option<u32>,
    pub tensors: bool,
    pub collectives: bool,
    pub warmup: u64,
    pub calls: Option<u64>,
    /// `--live`: the live view in the terminal while the program runs.
    pub live: bool,
    /// `--simulate-gpu`: the GPU the run stands in for, and where its trace goes (`--trace`, or
    /// a file in the temporary directory); the run's own `trace` is then None.
    pub simulate: Option<Simulation>,
    /// memprof's command line, for the report.
    pub command_line: Vec<String>,
}

/// What the user's program is.
#[derive(Clone, Debug)]
pub struct Program {
    /// The script path, or the module name with `module`.
    pub script: PathBuf,
    pub module: bool,
    pub args: Vec<String>,
    pub targets: Vec<String>,
}

/// Where a run's report goes: a file (in `file_format`) and/or the terminal.
#[derive(Clone, Debug)]
pub struct ReportDestination {
    pub output: Option<PathBuf>,
    pub file_format: Format,
    /// The format printed to standard output, if this process prints: without -o, or with a
    /// multi-rank run's default file; and in a multi-rank run only rank 0 (or --all-ranks).
    pub printed: Option<Format>,
    /// The stat columns are memprof's defaults (no --stat): a narrow terminal may leave some out.
    pub default_columns: bool,
    /// A multi-rank run without -o writes each rank's report to `memprof.rank<N>.<ext>`.
    pub default_file: bool,
    /// `--gather`: every rank's report handed to rank 0, which writes them all.
    pub gather: Option<Gather>,
    /// What to tell the user about the rank's file name, if anything.
    pub rank_note: Option<String>,
}

/// `--gather`: where rank 0 writes each rank's report, and how long it waits for them.
#[derive(Clone, Debug)]
pub struct Gather {
    /// `-o` (absolute; placeholders kept), or the default file's name, `memprof.rank{rank}.EXT`.
    pub template: PathBuf,
    pub timeout_seconds: u64,
}

impl Gather {
    /// `--gather` for this process: None in a run of one rank (nothing to gather); an error
    /// where the report cannot be merged or no torchrun store is there to hand it over.
    fn plan(
        args: &RunArgs,
        process: &ProcessInfo,
        file_format: Format,
        has_file: bool,
    ) -> Result<Option<Gather>> {
        if !args.gather || !ranks::is_multi(process) {
            return Ok(None);
        }
        if !has_file || file_format == Format::Table {
            return Err(Error::usage(
                "--gather hands over each rank's report file, and this run writes a table",
            )
            .hint("write JSON, YAML or HTML: -o 'reports/step.{rank}.json'"));
        }
        if std::env::var("TORCHELASTIC_USE_AGENT_STORE").as_deref() != Ok("True") {
            return Err(Error::usage(
                "--gather hands reports over torchrun's store, and this rank was not started by \
                 torchrun with its agent's store (TORCHELASTIC_USE_AGENT_STORE is not True)",
            )
            .hint(
                "launch with torchrun (its c10d or static rendezvous), or leave out --gather and \
                 copy each node's reports (-o 'reports/step.{rank}.json') to one place",
            ));
        }
        let template = match &args.output {
            Some(t) => t.clone(),
            None => PathBuf::from(format!("memprof.rank{{rank}}.{}", file_format.extension())),
        };
        Ok(Some(Gather {
            template: absolute(template)?,
            timeout_seconds: args.gather_timeout,
        }))
    }
}

impl RunConfig {
    /// Validates `memprof run`'s options on a machine with `cuda_devices` CUDA devices.
    pub fn new(global: &GlobalOptions, args: RunArgs, cuda_devices: i32) -> Result<RunConfig> {
        let process = ranks::this_process();
        let format = Format::resolve(args.format, args.output.as_deref());
        let (output, rank_note) =
            ranks::output_path(args.output.as_deref(), &process, format.extension())?;
        // Resolved now: a script that changes directory (Hydra does) must not move the report.
        let output = output.map(absolute).transpose()?;
        // Without -o, a multi-rank run still keeps every rank's report, as JSON or YAML.
        let default_file = args.output.is_none() && output.is_some();
        let file_format = if default_file && format == Format::Table {
            Format::Json
        } else {
            format
        };
        let prints = !ranks::is_multi(&process) || process.rank == 0 || args.all_ranks;
        let gather = Gather::plan(&args, &process, file_format, output.is_some())?;
        if args.live && ranks::is_multi(&process) {
            return Err(Error::usage(
                "--live draws one process's view in a terminal, and this run has several ranks",
            )
            .hint("leave out --live and watch a rank with `memprof live PID` (its PID, as ps or nvidia-smi shows it)"));
        }
        if let Some(path) = &output {
            file::check_writable(path, Written::Report)?;
        }
        let history = side_file(args.history.as_deref(), &process, "pickle")?;
        if let Some(path) = &history {
            file::check_writable(path, Written::History)?;
            if args.history_max_entries == 0 {
                return Err(Error::usage("--history-max-entries must be at least 1")
                    .hint("the default keeps the latest 100000 events"));
            }
        }
        let mut trace = side_file(args.trace.as_deref(), &process, "json")?;
        if let Some(path) = &trace {
            file::check_writable(path, Written::Trace)?;
        }
        let simulate = Simulation::plan(&args, trace.take_if(|_| args.simulate_gpu.is_some()))?;
        let plot = side_file(args.plot.as_deref(), &process, "svg")?;
        if let Some(path) = &plot {
            crate::render::plot::kind_of(path)?;
            file::check_writable(path, Written::Plot { flag: "--plot" })?;
        }
        if args.depth.is_some() && !args.modules && args.suggest_checkpoints.is_none() {
            return Err(
                Error::usage("--depth shapes the module report, which is off")
                    .hint("add --modules (or --suggest-checkpoints N)"),
            );
        }
        let source = resolve_device(global.device.as_deref(), cuda_devices)?;
        let mut columns = resolve_stats(&global.stats, source)?;
        let cuda = matches!(source, Source::Cuda(_));
        let budgets = budgets::parse(&args.max, |key| {
            stats::stats_for(cuda).iter().any(|s| s.key == key)
        })?;
        // A budgeted stat is measured even when --stat did not choose it.
        for b in budgets.iter().filter(|b| !is_delta(&b.key)) {
            if !columns.iter().any(|c| c.key == b.key) {
                columns.extend(resolve_stats(std::slice::from_ref(&b.key), source)?);
            }
        }
        Ok(RunConfig {
            report: ReportDestination {
                printed: (prints && (output.is_none() || default_file)).then_some(format),
                output,
                file_format,
                default_columns: global.stats.is_empty(),
                default_file,
                rank_note,
                gather,
            },
            process,
            source,
            columns,
            follow_device: global.device.is_none(),
            budgets,
            history,
            history_max_entries: args.history_max_entries,
            trace,
            plot,
            peak_sites: args.peak_sites as usize,
            modules: args.modules || args.suggest_checkpoints.is_some(),
            depth: args.depth,
            suggest_checkpoints: args.suggest_checkpoints,
            tensors: args.tensors,
            collectives: args.collectives,
            warmup: args.warmup,
            calls: args.calls,
            live: args.live,
            simulate,
            command_line: std::env::args().collect(),
            program: Program {
                script: args.script,
                module: args.module,
                args: args.args,
                targets: args.functions,
            },
        })
    }

    /// `--warmup` or `--calls` chose which calls are measured.
    pub fn scheduled(&self) -> bool {
        self.warmup > 0 || self.calls.is_some()
    }

    /// How the report names the program: `train.py`, or `-m pkg.train`.
    pub fn script_label(&self) -> String {
        if self.program.module {
            format!("-m {}", self.program.script.display())
        } else {
            self.program.script.display().to_string()
        }
    }
}

/// A file written beside the report (`--history`, `--plot`), named as `-o` is (placeholders, the
/// rank inserted under several ranks); none when not asked for, whatever the ranks.
fn side_file(
    template: Option<&Path>,
    process: &ProcessInfo,
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

/// The device measured first with no `--device`: a launcher's rank's own GPU (`LOCAL_RANK`, as
/// torchrun and accelerate set it, when that many devices are visible: with
/// `CUDA_VISIBLE_DEVICES` narrowed to one per rank, cuda:0), else cuda:0; the CPU without a GPU.
/// The run then follows the program's `torch.cuda.set_device` (`follow_device`).
pub fn default_device(cuda_devices: i32, local_rank: Option<&str>) -> Source {
    if cuda_devices == 0 {
        return Source::Cpu;
    }
    let rank = local_rank.and_then(|r| r.trim().parse::<i32>().ok());
    Source::Cuda(rank.filter(|r| (0..cuda_devices).contains(r)).unwrap_or(0))
}

/// Parses `--device`: `cpu`, `N`, `cuda`, `cuda:N`. `None`: `default_device`.
pub fn resolve_device(requested: Option<&str>, cuda_devices: i32) -> Result<Source> {
    let available = || -> String {
        if cuda_devices == 0 {
            "this machine has no CUDA device".to_string()
        } else {
            let names: Vec<String> = (0..cuda_devices).map(|i| format!("cuda:{i}")).collect();
            format!(
                "this machine has {} CUDA device{}: {}",
                cuda_devices,
                if cuda_devices == 1 { "" } else { "s" },
                names.join(", ")
            )
        }
    };
    let hint = || -> String {
        if cuda_devices == 0 {
            "pass --device cpu, or run on a machine with a GPU".to_string()
        } else {
            format!(
                "pass --device 0{} or --device cpu",
                if cuda_devices > 1 {
                    format!("..{}", cuda_devices - 1)
                } else {
                    String::new()
                }
            )
        }
    };
    let Some(text) = requested else {
        return Ok(default_device(
            cuda_devices,
            std::env::var("LOCAL_RANK").ok().as_deref(),
        ));
    };
    let t = text.trim().to_ascii_lowercase();
    if t == "cpu" {
        return Ok(Source::Cpu);
    }
    let index = if t == "cuda" {
        Some(0)
    } else {
        t.strip_prefix("cuda:")
            .unwrap_or(&t)
            .parse::<i32>()
            .ok()
            .filter(|i| *i >= 0)
    };
    let Some(index) = index else {
        return Err(Error::usage(format!("'--device {text}' is not a device"))
            .hint("use a CUDA index (0, cuda:1) or cpu"));
    };
    if index >= cuda_devices {
        return Err(
            Error::usage(format!("'--device {text}' does not exist: {}", available())).hint(hint()),
        );
    }
    Ok(Source::Cuda(index))
}

/// Validates `--stat` keys for the device (defaults when none), without duplicates.
pub fn resolve_stats(requested: &[String], source: Source) -> Result<Vec<StatDef>> {
    let cuda = matches!(source, Source::Cuda(_));
    let known = stats::stats_for(cuda);
    let keys: Vec<String> = if requested.is_empty() {
        stats::default_keys(cuda)
            .into_iter()
            .map(String::from)
            .collect()
    } else {
        stats::requested_keys(requested)
    };
    let mut out: Vec<StatDef> = Vec::new();
    for key in keys {
        let Some(def) = known.iter().find(|s| s.key == key) else {
            let device = if cuda { "CUDA" } else { "--device cpu" };
            let mut err = Error::usage(format!("unknown stat '{key}' for {device}"));
            let is_cuda_key = !cuda && stats::cuda_stats().iter().any(|s| s.key == key);
            let near = stats::closest_keys(&key, &known, 3).join(", ");
            err = if is_cuda_key {
                err.hint(format!(
                    "'{key}' exists only on a CUDA device; on the CPU memprof measures: {}",
                    known
                        .iter()
                        .map(|s| s.key.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            } else {
                err.hint(format!(
                    "closest keys: {near} (`memprof stats` lists them all)"
                ))
            };
            return Err(err);
        };
        if !out.iter().any(|s| s.key == def.key) {
            out.push(def.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_defaults_to_cuda0_when_a_gpu_exists_else_cpu() {
        assert_eq!(resolve_device(None, 2).unwrap(), Source::Cuda(0));
        assert_eq!(resolve_device(None, 0).unwrap(), Source::Cpu);
    }

    #[test]
    fn with_no_device_a_ranks_local_gpu_comes_first() {
        assert_eq!(default_device(2, Some("1")), Source::Cuda(1));
        assert_eq!(default_device(2, Some("0")), Source::Cuda(0));
        // One visible device per rank (CUDA_VISIBLE_DEVICES): that one is cuda:0.
        assert_eq!(default_device(1, Some("3")), Source::Cuda(0));
        assert_eq!(default_device(2, Some("x")), Source::Cuda(0));
        assert_eq!(default_device(2, None), Source::Cuda(0));
        assert_eq!(default_device(0, Some("1")), Source::Cpu);
    }

    #[test]
    fn device_spellings() {
        assert_eq!(resolve_device(Some("1"), 2).unwrap(), Source::Cuda(1));
        assert_eq!(resolve_device(Some("cuda:1"), 2).unwrap(), Source::Cuda(1));
        assert_eq!(resolve_device(Some("cuda"), 1).unwrap(), Source::Cuda(0));
        assert_eq!(resolve_device(Some("CPU"), 0).unwrap(), Source::Cpu);
    }

    #[test]
    fn missing_device_lists_those_that_exist() {
        let e = resolve_device(Some("3"), 2).unwrap_err();
        assert_eq!(
            e.message,
            "'--device 3' does not exist: this machine has 2 CUDA devices: cuda:0, cuda:1"
        );
        let e = resolve_device(Some("0"), 0).unwrap_err();
        assert!(e.message.contains("no CUDA device"), "{}", e.message);
        assert!(resolve_device(Some("gpu"), 1).is_err());
    }

    #[test]
    fn stats_are_validated_with_suggestions() {
        let e = resolve_stats(&["reserved_bytes.all.peek".into()], Source::Cuda(0)).unwrap_err();
        assert!(e
            .hint
            .unwrap()
            .starts_with("closest keys: reserved_bytes.all.peak"));
        let e = resolve_stats(&["segment.all.peak".into()], Source::Cpu).unwrap_err();
        assert!(e.hint.unwrap().contains("exists only on a CUDA device"));
        let ok = resolve_stats(
            &[
                "num_ooms".into(),
                "num_ooms".into(),
                "oversize_allocations.peak".into(),
            ],
            Source::Cuda(0),
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
    }
}

/// `--simulate-gpu NAME`: which GPU, and the trace the simulated run writes.
#[derive(Clone, Debug)]
pub struct Simulation {
    pub gpu: &'static crate::model::gpus::GpuModel,
    pub trace: PathBuf,
    /// Whether the trace was asked for (`--trace`); else it is removed after the replay.
    pub keep_trace: bool,
    /// `--simulate-ranks N`: the run is rank 0 of N (0: no process group simulated).
    pub ranks: u32,
}

impl Simulation {
    fn plan(args: &RunArgs, trace: Option<PathBuf>) -> Result<Option<Simulation>> {
        use crate::model::gpus;
        let Some(name) = args.simulate_gpu.as_deref() else {
            if args.simulate_ranks.is_some() {
                return Err(Error::usage(
                    "--simulate-ranks simulates the ranks of a run without a GPU, and needs \
                     --simulate-gpu",
                )
                .hint("add --simulate-gpu H100 (or the GPU the ranks would have)"));
            }
            return Ok(None);
        };
        let gpu = gpus::find(name).ok_or_else(|| {
            Error::usage(format!(
                "--simulate-gpu {name}: not a GPU memprof can simulate"
            ))
            .hint(format!("name one of {}", gpus::keys()))
        })?;
        let incompatible = [
            (args.modules, "--modules"),
            (args.tensors, "--tensors"),
            (args.history.is_some(), "--history"),
            (args.live, "--live"),
            (args.suggest_checkpoints.is_some(), "--suggest-checkpoints"),
            (args.collectives, "--collectives"),
            (!args.functions.is_empty(), "-f"),
            (!args.max.is_empty(), "--max"),
            (args.plot.is_some(), "--plot"),
            (args.warmup > 0 || args.calls.is_some(), "--warmup/--calls"),
        ];
        if let Some((_, flag)) = incompatible.iter().find(|(on, _)| *on) {
            return Err(Error::usage(format!(
                "--simulate-gpu runs the program without a device, and {flag} measures a real one \
                 (a simulated run's report is its prediction: the peak by line and category)"
            ))
            .hint(format!("leave out {flag}, or --simulate-gpu")));
        }
        let keep_trace = trace.is_some();
        let trace = trace.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("memprof-simulated-{}.json", std::process::id()))
        });
        Ok(Some(Simulation {
            gpu,
            trace,
            keep_trace,
            ranks: args.simulate_ranks.unwrap_or(0),
        }))
    }
}
