//! One in-process measurement (`memprof.profile`): the command's recorder, peak tracker and
//! bootstrap installed into the running interpreter at `start`, and everything taken off again
//! at `stop`, which returns the command's report. One session at a time per process.
use crate::cli::config::RunConfig;
use crate::cli::{Cli, Command};
use crate::model::profile::Outcome;
use crate::python::{runner, tracing};
use crate::render::{self, Format};
use crate::{capture, session, torch};
use clap::Parser;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A session is running (sessions do not nest: there is one recorder).
static RUNNING: AtomicBool = AtomicBool::new(false);
/// The device the allocation reporter was installed for (installed once per device: libtorch
/// keeps each installation on the thread's stack of debug infos).
static REPORTER_DEVICE: Mutex<Option<Option<i32>>> = Mutex::new(None);

#[pyclass(unsendable, module = "memprof._native")]
pub struct Session {
    config: RunConfig,
    boot: Option<Py<PyModule>>,
    /// allocated_bytes.all.current of the measured device when the session started.
    #[pyo3(get)]
    allocated_at_start: i64,
    /// When stopped: the most bytes that what the session allocated held at once (its own
    /// peak, whatever was live before it or freed during it).
    #[pyo3(get)]
    peak_above_start: i64,
}

/// Starts measuring. `argv`: the command's options (`--device 1`, `--stat KEY`, `run`'s `-f
/// NAME`, `--modules`, `--tensors`...), checked as the command checks them; `callables`:
/// functions, methods or code objects to profile; `label`: what the report calls the program.
/// `command`: what the report says measured it (default `memprof.profile` and the options;
/// `memprof attach` names itself).
#[pyfunction]
#[pyo3(signature = (argv, callables, label, categories=true, command=None))]
pub fn start(
    py: Python<'_>,
    argv: Vec<String>,
    callables: Vec<Py<PyAny>>,
    label: String,
    categories: bool,
    command: Option<Vec<String>>,
) -> PyResult<Session> {
    if RUNNING.swap(true, Ordering::SeqCst) {
        return Err(PyRuntimeError::new_err(
            "a memprof session is already running in this process: sessions do not nest \
             (profile the outer block, with the inner functions as targets)",
        ));
    }
    bind_torch(py)
        .and_then(|()| begin(py, argv, callables, label, categories))
        .map(|mut session| {
            if let Some(command) = command {
                session.config.command_line = command;
            }
            session
        })
        .inspect_err(|_| end())
}

/// Loads memprof's library for the torch this interpreter imports (importing it if the
/// program has not), once: `import memprof` does it first, a spawned child that memprof
/// follows does it here.
fn bind_torch(py: Python<'_>) -> PyResult<()> {
    let torch = py.import("torch")?;
    let file: String = torch.getattr("__file__")?.extract()?;
    let version: String = torch.getattr("__version__")?.str()?.extract()?;
    let root = std::path::Path::new(&file)
        .parent()
        .ok_or_else(|| PyRuntimeError::new_err("torch.__file__ has no folder"))?;
    crate::capture::load_torch(root, &version).map_err(to_py)
}

fn begin(
    py: Python<'_>,
    argv: Vec<String>,
    callables: Vec<Py<PyAny>>,
    label: String,
    categories: bool,
) -> PyResult<Session> {
    let config = config_of(argv, label)?;
    for unsupported in [
        (config.trace.is_some(), "--trace"),
        (config.plot.is_some(), "--plot"),
        (!config.budgets.is_empty(), "--max"),
        (config.report.output.is_some(), "-o"),
    ] {
        if unsupported.0 {
            return Err(PyValueError::new_err(format!(
                "{} is the command's (`memprof run`); in-process, use the Report: .save(path) \
                 writes it",
                unsupported.1
            )));
        }
    }
    let device = config.source.cuda_index();
    if REPORTER_DEVICE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_none()
    {
        // The first session: what the program allocated on the CPU before it is live from
        // before (its own row in the peak, `allocated_at_start`), and its frees are seen.
        adopt_live_cpu_storages(py)?;
    }
    session::begin(&config).map_err(to_py)?;
    {
        let mut installed = REPORTER_DEVICE.lock().unwrap_or_else(|e| e.into_inner());
        if *installed != Some(device) {
            torch::install_reporter(device).map_err(to_py)?;
            *installed = Some(device);
        } else {
            torch::attach_reporter_to_thread();
        }
    }
    tracing::reset();
    let boot = runner::load_bootstrap(py)?;
    // What tells `memprof.profile` that this `_memprof` is an in-process session's, not the
    // command's (which profiles the whole program: a session cannot run inside it).
    py.import("_memprof")?.setattr("in_process", true)?;
    let mut options = session::program(&config).options;
    options.in_process = true;
    options.peak_categories = categories;
    let specs = config.program.targets.clone();
    boot.call_method1("install_in_process", (specs, callables, options))?;
    tracing::start_on_this_thread();
    let allocated_at_start = capture::recorder::with(|r| r.allocated_now()).unwrap_or(0);
    Ok(Session {
        config,
        boot: Some(boot.unbind()),
        allocated_at_start,
        peak_above_start: 0,
    })
}

/// Hands libtorch the CPU storages that Python holds now (tensors found by the garbage
/// collector, views counted once by their storage), which memprof's reporter never saw allocated.
fn adopt_live_cpu_storages(py: Python<'_>) -> PyResult<()> {
    let tensor = py.import("torch")?.getattr("Tensor")?;
    let objects = py.import("gc")?.call_method0("get_objects")?;
    let mut storages = Vec::new();
    let mut impls = Vec::new();
    for object in objects.try_iter()? {
        let object = object?;
        // type(), not isinstance(): isinstance may read `__class__`, which runs arbitrary code
        // (a deprecated alias's warning, a proxy of a dead object).
        if !object.get_type().is_subclass(&tensor).unwrap_or(false) {
            continue;
        }
        // Sparse, meta and other storage-less tensors raise or are not on the CPU: skipped.
        let storage = match object.call_method0("untyped_storage") {
            Ok(s) => s,
            Err(_) => continue,
        };
        let on_cpu = storage
            .getattr("device")
            .and_then(|d| d.getattr("type"))
            .and_then(|t| t.extract::<String>())
            .is_ok_and(|t| t == "cpu");
        if let (true, Ok(address)) = (on_cpu, storage.getattr("_cdata").and_then(|c| c.extract())) {
            impls.push(address);
            // Held until the call returns: the addresses stay valid.
            storages.push(storage);
        }
    }
    torch::adopt_cpu_storages(&impls);
    drop(storages);
    Ok(())
}

/// The command's options for an in-process session, parsed and checked as `memprof run`'s.
fn config_of(argv: Vec<String>, label: String) -> PyResult<RunConfig> {
    let argv_shown: Vec<String> = argv.iter().cloned().chain([label.clone()]).collect();
    let line = std::iter::once("memprof".to_string())
        .chain(argv)
        .chain([label]);
    let cli = Cli::try_parse_from(line)
        .map_err(|e| PyValueError::new_err(e.render().to_string().trim_end().to_string()))?;
    let Command::Run(run) = cli.command else {
        return Err(PyValueError::new_err("the options must be `run`'s"));
    };
    let measure = cli.global.with(&run.measure);
    let mut config = RunConfig::new(&measure, run, torch::cuda_device_count()).map_err(to_py)?;
    // A rank of a distributed run gets `memprof.rank<N>.json` as the command's default report
    // file; a session's report is its Report (`.save(path)`), so no file is implied here.
    if config.report.default_file {
        config.report.output = None;
        config.report.default_file = false;
    }
    // With no device given, the session measures the CUDA device the program uses now (a rank's
    // own GPU, set before the session), and follows `torch.cuda.set_device` from there.
    if config.follow_device {
        if let (memprof_report::model::device::Source::Cuda(_), Some(current)) =
            (config.source, torch::current_device())
        {
            config.source = memprof_report::model::device::Source::Cuda(current);
        }
    }
    // Not the interpreter's own argv: what measured this.
    config.command_line = std::iter::once("memprof.profile".to_string())
        .chain(argv_shown)
        .collect();
    Ok(config)
}

#[pymethods]
impl Session {
    /// Stops measuring and returns the report as JSON (the command's schema). `exception`:
    /// `TypeName: message` when the measured code raised.
    #[pyo3(signature = (exception=None))]
    fn stop(&mut self, py: Python<'_>, exception: Option<String>) -> PyResult<String> {
        let Some(boot) = self.boot.take() else {
            return Err(PyRuntimeError::new_err(
                "this memprof session has already stopped",
            ));
        };
        let boot = boot.into_bound(py);
        let outcome = Outcome {
            status: if exception.is_some() {
                "exception"
            } else {
                "completed"
            }
            .into(),
            exit_code: i32::from(exception.is_some()),
            exception,
        };
        let facts = runner::collect(py, &boot, outcome);
        self.peak_above_start = capture::peak::with(|t| t.seen_max()).unwrap_or(0);
        let uninstalled = boot.call_method0("uninstall");
        let finished = session::finish(&self.config, facts);
        end();
        uninstalled?;
        Ok(render::render(&finished.profile, Format::Json))
    }

    /// Answers `memprof snapshot PID` and `memprof live PID` on the socket `path` with this
    /// session's report so far, until the session stops (`memprof attach`).
    fn serve(&self, path: String) -> PyResult<()> {
        crate::commands::answer::start_at(&self.config, path.into())
            .map_err(|e| PyRuntimeError::new_err(format!("cannot listen on {e}")))
    }

    /// A spawned child's session: on SIGTERM at the default action (a Pool's `terminate()`),
    /// the report so far goes to `path` as the child's, then the process dies of SIGTERM as
    /// python's would (src/python/py/children.py).
    fn write_on_sigterm(&self, path: String, parent: u32) -> PyResult<()> {
        let config = self.config.clone();
        let path = std::path::PathBuf::from(path);
        capture::interrupt::set_emergency_report(Box::new(move |ending| {
            if let Some(profile) = session::report_so_far(ending, &config) {
                session::children::write_report_as_child(profile, &path, parent, "spawn");
            }
        }));
        capture::interrupt::install_sigterm().map_err(to_py)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.boot.is_some() {
            // Never stopped (the Python object was dropped): the hooks must not outlive it.
            Python::attach(|py| {
                let _ = self.stop(py, None);
            });
        }
    }
}

/// The session is over: nothing of it stays on (no recorder, no tracker, no line hook), and
/// another may start.
fn end() {
    crate::commands::answer::stop();
    capture::peak::stop();
    crate::python::sites::stop();
    *capture::recorder::RECORDER
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = None;
    tracing::reset();
    crate::python::ext::forget_file_texts();
    RUNNING.store(false, Ordering::SeqCst);
}

pub(crate) fn to_py(e: crate::error::Error) -> PyErr {
    match e.hint {
        Some(hint) => PyValueError::new_err(format!("{} ({hint})", e.message)),
        None => PyValueError::new_err(e.message),
    }
}
