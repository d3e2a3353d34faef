//! The command line: clap's definitions (help text, no logic, in this file), where the
//! script's own arguments start (argv), and `memprof run`'s options validated into one
//! `RunConfig` (config). Uses `analysis` (budgets), `render` (formats), `output` (rank paths,
//! writable checks), `model` and `error`.
pub mod argv;
pub mod config;

pub use crate::render::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Line-level memory profiler for PyTorch programs: exact libtorch allocator statistics for every
/// line of the functions you name, with no code changes.
#[derive(Parser, Debug)]
// `--version` also says which Python `run` embeds and how libpython is linked: the binaries
// give it (`commands::parse`), from what their build found.
#[command(
    name = "memprof",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOptions,
    #[command(subcommand)]
    pub command: Command,
}

/// What to measure: before the subcommand (`memprof --device 1 run ...`, as the command has
/// always taken them) or after `run`. `show` and `merge` take `--stat` after them too; the
/// subcommands that only read files (`diff`, `plot`, `fit`, `stats`) take neither.
#[derive(Args, Debug, Default, Clone)]
pub struct GlobalOptions {
    /// Device to measure: a CUDA index (`0`, `cuda:1`) or `cpu` [default: the current CUDA
    /// device, or `cpu` when there is no GPU]
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// A stat to show, as `torch.cuda.memory_stats()` names it (repeatable; `memprof stats`
    /// lists them) [default: allocated_bytes.all.peak, allocated_bytes.all.current, and
    /// reserved_bytes.all.peak on CUDA or host_rss_bytes.current on the CPU]
    #[arg(long = "stat", value_name = "KEY")]
    pub stats: Vec<String>,
}

impl GlobalOptions {
    /// These options (written before the subcommand) with `later` (after it): its device
    /// wins, the stats add up.
    pub fn with(&self, later: &GlobalOptions) -> GlobalOptions {
        GlobalOptions {
            device: later.device.clone().or_else(|| self.device.clone()),
            stats: self.stats.iter().chain(&later.stats).cloned().collect(),
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a Python script (or `-m module`) as `python` would, profiling the targeted functions
    Run(RunArgs),
    /// Render a saved YAML or JSON report as a table (or convert it); several reports (the
    /// ranks of one job) are merged as by `memprof merge`
    Show(ShowArgs),
    /// Merge the reports of the ranks of one job: per line and per module, the max and min over
    /// ranks of each stat, the rank that holds the max, and the imbalance (max - min)
    Merge(MergeArgs),
    /// Compare two runs' reports: per function line (matched by source text) and module, the
    /// change of Δ and of each stat; `--max-increase` fails CI (exit 4)
    Diff(DiffArgs),
    /// Draw saved reports as pictures (SVG, PNG or HTML, by the file name): memory over module
    /// calls, saved and parameter bytes per module, each targeted line's peak and Δ; several
    /// reports (a job's ranks) give one series per rank
    Plot(PlotArgs),
    /// Will it fit? Replay an allocation trace on memprof's model of PyTorch's CUDA caching
    /// allocator, on a device of --memory with --alloc-conf settings: the predicted reserved and
    /// allocated peaks, cudaMalloc retries, segments, and where it runs out of memory (exit 5)
    Fit(FitArgs),
    /// The report so far of a program that `memprof run` is running (its PID, as ps or
    /// nvidia-smi shows it): the peak so far and its sites, what grows, the timeline; the
    /// program runs on unchanged
    Snapshot(SnapshotArgs),
    /// The live view of a program that `memprof run` is running (its PID), in this terminal,
    /// about once a second: memory now and at its peak, memory over time, the top sites, what
    /// grows; `q` closes it, the program runs on
    Live(LiveArgs),
    /// Measure a running Python 3.14+ program that was started without memprof (its PID), from
    /// now on, through sys.remote_exec (PEP 768): until Ctrl-C, --duration, `q` in --live or the
    /// program's end, then its report; the program runs on, and snapshot and live read it
    /// meanwhile
    Attach(AttachArgs),
    /// List every stat key with what it means
    Stats,
    /// Print a shell completion script
    #[command(hide = true)]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Args, Debug)]
#[command(trailing_var_arg = true)]
pub struct RunArgs {
    #[command(flatten)]
    pub measure: GlobalOptions,
    /// Function to profile (repeatable): `name`, `Class.method`, `outer.<locals>.inner`,
    /// `package.module:Qual.name` or `path/to/file.py:Qual.name`; `@profile` in the script
    /// marks functions too
    #[arg(short = 'f', long = "function", value_name = "TARGET")]
    pub functions: Vec<String>,
    /// Run SCRIPT as a module name, like `python -m SCRIPT` (`memprof run -m pkg.mod args...`)
    #[arg(short = 'm')]
    pub module: bool,
    /// Report format (default: from -o's extension, `.json`, `.yaml`/`.yml`, `.html` (an
    /// interactive page: the timeline, the peak by stack, the tables); else table)
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the report to this file (atomically) instead of standard output; may hold
    /// {rank}, {local_rank}, {world_size}, {host}, {pid}; under several ranks a plain path gets
    /// the rank (ddp.json -> ddp.rank1.json)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write the allocation history of the measured targeted calls to FILE (a pickle that
    /// pytorch.org/memory_viz and `python -m torch.cuda._memory_viz` open): torch's own on CUDA,
    /// memprof's record of the allocator's reports on the CPU; may hold the same placeholders as -o
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// With --history: keep at most this many events (the latest)
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub history_max_entries: u64,
    /// Write the measured device's allocations and frees, in order, with their lines, to FILE
    /// (JSON): what `memprof fit FILE --memory SIZE` replays on another device or with other
    /// allocator settings; may hold the same placeholders as -o
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Also draw the report as a picture: FILE.svg, FILE.png or FILE.html (as `memprof plot`);
    /// may hold the same placeholders as -o
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// How many sites the peak lists, largest first (the rest are summed in one row)
    #[arg(long, value_name = "N", default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..))]
    pub peak_sites: u32,
    /// Also profile every torch.nn.Module call, forward and backward: allocated Δ, peak, bytes
    /// saved for backward, parameters, as a tree of qualified names (works without -f)
    #[arg(long)]
    pub modules: bool,
    /// Show modules down to this depth of qualified name (`layer1` is 1, `layer1.0.conv1` 3);
    /// with --suggest-checkpoints, split between the modules at this depth
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub depth: Option<u32>,
    /// Suggest N activation-checkpoint split points from the measured saved activations, with
    /// the estimated activation memory before and after (implies --modules)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub suggest_checkpoints: Option<u32>,
    /// At the end of each targeted call and where an exception leaves one, list the live tensors
    /// on the device by storage, named from the model and optimizer, with totals by category
    #[arg(long)]
    pub tensors: bool,
    /// Also count the bytes of torch.distributed collectives (all_reduce, all_gather,
    /// reduce_scatter, ...) issued during each line and module call, by kind
    #[arg(long)]
    pub collectives: bool,
    /// Skip the first N calls of each targeted function (and, with --modules and no -f, of each
    /// root module): their lines are not measured
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: u64,
    /// Measure M calls after the warm-up, then stop every hook so the rest of the run pays
    /// nothing
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u64).range(1..))]
    pub calls: Option<u64>,
    /// In a multi-rank run (RANK and WORLD_SIZE set, as by torchrun), print every rank's report,
    /// not only rank 0's
    #[arg(long)]
    pub all_ranks: bool,
    /// Show the run live in the terminal, about once a second, the program's output above it:
    /// memory now and at its peak, memory over time, the top sites now, what grows, the step;
    /// `q` closes the view and the program runs on to its report
    #[arg(long)]
    pub live: bool,
    /// Run the program without a GPU as if it ran on this one (H100, H200, A100-80GB,
    /// A100-40GB, L4, RTX4090): CUDA tensors simulated, no kernels run, and the allocations the
    /// CUDA caching allocator would have seen replayed on memprof's model of it: the predicted
    /// peaks, whether it fits, the peak by line and category (--trace FILE keeps the trace for
    /// `memprof fit`)
    #[arg(long, value_name = "GPU")]
    pub simulate_gpu: Option<String>,
    /// With --simulate-gpu: the program runs as rank 0 of N ranks, one GPU each (the
    /// environment torchrun gives it; its process group's collectives simulated): FSDP2, DDP
    /// and DTensor programs, one rank's peak
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub simulate_ranks: Option<u32>,
    /// Under torchrun, each rank also hands its report to rank 0 through torchrun's own store,
    /// and rank 0 writes every rank's report on its node (by -o's name), no shared filesystem
    /// needed
    #[arg(long)]
    pub gather: bool,
    /// With --gather: how long rank 0 waits, after its own program ended, for the other ranks'
    /// reports (those missing then are named)
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 300,
        requires = "gather"
    )]
    pub gather_timeout: u64,
    /// A budget (repeatable): `KEY=SIZE` or `FUNCTION:KEY=SIZE`, KEY a stat, `delta` (a line's Δ
    /// summed over its hits) or `delta_per_call` (that Δ per hit), SIZE in bytes or with a unit
    /// (`20GiB`, `512MB`); a line above it is marked and memprof exits 3
    #[arg(long = "max", value_name = "[FUNCTION:]KEY=SIZE")]
    pub max: Vec<String>,
    /// The Python script to run (a module name with -m)
    #[arg(value_name = "SCRIPT")]
    pub script: PathBuf,
    /// Arguments passed to the script as sys.argv[1:]
    #[arg(value_name = "ARGS", allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Reports written by `memprof run --format yaml|json -o FILE` (or by `memprof merge`)
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Output format (default: from -o's extension, `.json`, `.yaml`/`.yml`, `.html`; else
    /// table)
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write to this file (atomically) instead of standard output: `-o report.html` draws one
    /// run's report as an interactive page
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With several reports: a stat column to keep (repeatable) [default: every stat they have]
    #[arg(long = "stat", value_name = "KEY")]
    pub stats: Vec<String>,
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Reports written by `memprof run --format yaml|json -o FILE` (the ranks' own, not merged)
    #[arg(value_name = "REPORT", required = true)]
    pub files: Vec<PathBuf>,
    /// The picture to write: FILE.svg, FILE.png or FILE.html
    #[arg(short = 'o', long = "output", value_name = "FILE", required = true)]
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The ranks' reports (YAML, JSON or their pages), e.g. `ddp.rank*.json`
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Output format (default: from -o's extension, `.json`, `.yaml`/`.yml`, `.html` (the ranks'
    /// page); else table)
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the merged report to this file (atomically) instead of standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A stat column to keep (repeatable) [default: every stat the reports have]
    #[arg(long = "stat", value_name = "KEY")]
    pub stats: Vec<String>,
    /// Print these ranks' detail (where each ran, its file, its peak and what it was): a list
    /// such as `3,17` or `0-7,513` [default: every rank's up to 8 ranks, else none]
    #[arg(long, value_name = "LIST", conflicts_with = "all_ranks")]
    pub ranks: Option<String>,
    /// Print every rank's detail
    #[arg(long)]
    pub all_ranks: bool,
}

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// The process `memprof run` runs (each rank's under torchrun)
    #[arg(value_name = "PID")]
    pub pid: u32,
    /// Report format (default: from -o's extension, `.json`, `.yaml`/`.yml`, `.html`; else
    /// table)
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the report to this file (atomically) instead of standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct AttachArgs {
    #[command(flatten)]
    pub measure: GlobalOptions,
    /// The program's process (a Python 3.14 or later, with torch and torch-memprof installed
    /// in its environment)
    #[arg(value_name = "PID")]
    pub pid: u32,
    /// Function to profile line by line from now on (repeatable), as `memprof run -f` names it
    #[arg(short = 'f', long = "function", value_name = "TARGET")]
    pub functions: Vec<String>,
    /// Also profile every torch.nn.Module call from now on (`memprof run --modules`)
    #[arg(long)]
    pub modules: bool,
    /// At the end of each targeted call, list the live tensors (`memprof run --tensors`)
    #[arg(long)]
    pub tensors: bool,
    /// Detach after this many seconds [default: at Ctrl-C, or when the program ends]
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Show the live view while attached; `q` detaches
    #[arg(long, conflicts_with = "duration")]
    pub live: bool,
    /// Report format (default: from -o's extension, `.json`, `.yaml`/`.yml`, `.html`; else
    /// table)
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the report to this file (atomically) instead of standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct LiveArgs {
    /// The process `memprof run` runs
    #[arg(value_name = "PID")]
    pub pid: u32,
}

#[derive(Args, Debug)]
pub struct FitArgs {
    /// The allocation trace (JSON or YAML: memprof_trace, events); two or three of one program
    /// at different batch sizes (--batches) for --scale or --max-batch
    #[arg(value_name = "TRACE", num_args = 1..=3, required = true)]
    pub traces: Vec<PathBuf>,
    /// The traces' batch sizes, in their order (`8,16`)
    #[arg(long, value_name = "B1,B2[,B3]", value_delimiter = ',')]
    pub batches: Vec<u64>,
    /// Predict at this batch size: each allocation's size fitted as an affine function of the
    /// batch across the traces, the trace synthesized at N and replayed
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub scale: Option<u64>,
    /// Find the largest batch size that fits in --memory (from the traces, as --scale does)
    #[arg(long, conflicts_with = "scale")]
    pub max_batch: bool,
    /// The bytes the allocator may reserve on the device to predict for (`24GiB`, `80GB`)
    /// [default: the traced device's]
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// The allocator's settings, as PYTORCH_CUDA_ALLOC_CONF writes them
    /// (`max_split_size_mb:128,garbage_collection_threshold:0.6`) [default: the traced run's]
    #[arg(long = "alloc-conf", value_name = "KEY:VALUE,...")]
    pub alloc_conf: Option<String>,
    /// Output format (default: from -o's extension, `.json`, `.yaml`/`.yml`; else table)
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the prediction to this file (atomically) instead of standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The report of the earlier run (YAML or JSON)
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The report of the later run
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// Output format (default: from -o's extension, `.json`, `.yaml`/`.yml`; else table)
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the diff to this file (atomically) instead of standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Fail (exit 4) when a function's KEY (`delta` or a stat) grew by more than SIZE (`64MiB`)
    /// or PERCENT (`5%`) of its base value: for `delta` and other amounts its net per call, for a
    /// level or a peak the highest over its lines (repeatable)
    #[arg(long = "max-increase", value_name = "KEY=SIZE|PERCENT%")]
    pub max_increase: Vec<String>,
}
