//! Runs the user's script (or `-m module`) as `__main__`, exactly as `python` would, with the
//! targets armed: start-up checks, exceptions and exit codes, thread shutdown and atexit.
use super::ext::{self, inventory};
use super::{interpreter, tracing};
use crate::capture::interrupt;
use crate::error::{exit_code, Error, Result};
use crate::model::profile::Outcome;
use crate::torch;
use pyo3::exceptions::{PyKeyboardInterrupt, PySyntaxError, PySystemExit};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::ffi::CString;
use std::path::PathBuf;

const BOOTSTRAP: &str = include_str!("py/bootstrap.py");
const IMPORTS: &str = include_str!("py/imports.py");
const MODULES: &str = include_str!("py/modules.py");
const INVENTORY: &str = include_str!("py/inventory.py");
const OOM: &str = include_str!("py/oom.py");
const HISTORY: &str = include_str!("py/history.py");
const PEAK: &str = include_str!("py/peak.py");
const COMPILED: &str = include_str!("py/compiled.py");
const COMPILED_MODULES: &str = include_str!("py/compiled_modules.py");
const CHILDREN: &str = include_str!("py/children.py");
const SIMULATE: &str = include_str!("py/simulate.py");
const SIMULATE_LEDGER: &str = include_str!("py/simulate_ledger.py");
const SIMULATE_DEVICE: &str = include_str!("py/simulate_device.py");
const SIMULATE_TORCH: &str = include_str!("py/simulate_torch.py");
const SIMULATE_DISTRIBUTED: &str = include_str!("py/simulate_distributed.py");
const SIMULATE_COMPILE: &str = include_str!("py/simulate_compile.py");
const SIMULATE_CUDNN: &str = include_str!("py/simulate_cudnn.py");
const CUDNN_SM90: &str = include_str!("py/cudnn_sm90.py");

/// What to run.
pub struct Program {
    /// The script path, or the module name with `module`.
    pub script: PathBuf,
    pub module: bool,
    pub args: Vec<String>,
    pub targets: Vec<String>,
    pub options: Options,
}

/// What the bootstrap is installed with: one typed object that Python reads by attribute
/// (`options.modules`), so that a name misspelt on either side fails at once.
#[pyclass(frozen, get_all, name = "Options", module = "_memprof")]
#[derive(Clone, Debug)]
pub struct Options {
    /// `--modules`: track every torch.nn.Module call.
    pub modules: bool,
    /// `--tensors`: the tensor inventory at the end of targeted calls.
    pub tensors: bool,
    /// `--suggest-checkpoints`: the module tracker also measures each call's inputs.
    pub checkpoints: bool,
    /// `--collectives`: count the bytes of torch.distributed collectives.
    pub collectives: bool,
    /// `cuda` or `cpu`, and the CUDA index measured first.
    pub device_type: String,
    pub device_index: Option<i32>,
    /// `--modules` without -f under `--warmup`/`--calls`: the module tracker counts each root
    /// module's calls and asks the schedule's rule (`schedule_verdict`) about each.
    pub module_schedule: bool,
    /// `--modules` with -f under `--warmup`/`--calls`: module calls are measured during the
    /// targets' measured calls.
    pub follow_targets: bool,
    /// `--history`: the file to write, and how many events to keep.
    pub history: Option<String>,
    pub history_max_entries: u64,
    /// An in-process session (`memprof.profile`), not the command: nothing is installed that
    /// cannot be taken off at its end.
    pub in_process: bool,
    /// The peak's categories (parameters, gradients, optimizer state...): a scan of the live
    /// objects at the end (`memprof.profile(categories=False)` leaves it out).
    pub peak_categories: bool,
    /// The folder the program's child processes write their reports to (None: children are
    /// not followed, as in an in-process session).
    pub follow_children: Option<String>,
    /// The options a spawned child measures with (`memprof.profile`'s, as the command's
    /// options: `--device`, `--stat`, `run -f ...`).
    pub child_argv: Vec<String>,
    /// How the report names the program (`train.py`, `-m pkg.train`): a spawned child's
    /// report names it the same.
    pub script_label: String,
    /// `--simulate-gpu`: the GPU model (`model::gpus::GpuModel` as JSON) the run stands in for,
    /// and the file its simulated trace goes to (py/simulate.py).
    pub simulate_gpu: Option<String>,
    pub simulate_trace: Option<String>,
    /// `--simulate-ranks N`: the simulated run is rank 0 of N (0: no process group simulated).
    pub simulate_ranks: u32,
}

/// The Python and torch versions of the run, read as it starts (the torch version as its
/// installation names it, `2.15.0+cu132`).
pub struct Versions {
    pub python: String,
    pub torch: String,
}

static VERSIONS: std::sync::OnceLock<Versions> = std::sync::OnceLock::new();

/// The run's versions, once the command has checked torch (None in-process).
pub fn versions() -> Option<&'static Versions> {
    VERSIONS.get()
}

/// The running Python's version, `3.13.0`.
fn python_version(py: Python<'_>) -> String {
    py.import("platform")
        .and_then(|p| p.call_method0("python_version"))
        .and_then(|v| v.extract())
        .unwrap_or_default()
}

/// Facts gathered from Python for the report.
pub struct RunFacts {
    pub outcome: Outcome,
    pub python_version: String,
    pub torch_version: String,
    /// The CUDA device measured last (it follows the program's), None on the CPU.
    pub device_index: Option<i32>,
    /// The schedule was complete before the program ended, and memprof stopped its hooks.
    pub stopped_early: bool,
    /// Interpreter events the line hook handled (see `Metadata::hook_events`).
    pub hook_events: u64,
    /// What the run itself has to warn about (the bootstrap's own warnings are in `collected`).
    pub warnings: Vec<String>,
    /// Everything the bootstrap has for the report, as its JSON document (`report()`; the schema
    /// is `session::sections::Collected`); None when it could not give it (said on stderr).
    pub collected: Option<String>,
}

/// Starts the interpreter the script runs in (this one, for the wheel's `memprof run`) and
/// loads memprof's library for the torch the script will import: before the recorder is
/// installed, which reads that library.
pub fn start(program: &Program) -> Result<()> {
    let script_text = program.script.to_string_lossy().into_owned();
    if !program.module && !program.script.exists() {
        return Err(Error::usage(format!(
            "can't open file '{script_text}': No such file or directory"
        ))
        .hint("pass the path of a Python script, or `-m package.module`"));
    }
    let mut argv = vec![if program.module {
        "-m".to_string()
    } else {
        script_text
    }];
    argv.extend(program.args.iter().cloned());
    if interpreter::is_running() {
        // The wheel's `memprof run`: the user's own interpreter, with the native core loaded
        // (src/wheel/memprof/_launcher.py); it gets the script's argv as python would give it.
        interpreter::adopt(&argv)?;
    } else {
        let python = interpreter::find_python()?;
        interpreter::initialize(&python, &argv)?;
    }
    Python::attach(check_torch)
}

/// Runs the program under the hook (after `start`) and shuts Python's side down.
/// Returns Err only for memprof errors (exit 2); the script's own failures are in the outcome.
pub fn run(program: &Program) -> Result<RunFacts> {
    let device_index = program.options.device_index;
    let script_text = program.script.to_string_lossy().into_owned();
    Python::attach(|py| -> Result<RunFacts> {
        let boot = load_bootstrap(py).map_err(|e| python_failure(py, "start", e))?;
        torch::install_reporter(device_index)?;
        // A SIGINT ignored when the program started (a background job of a script) stays
        // ignored, as python leaves it. Else Python's own SIGINT handler must be
        // default_int_handler, so that memprof's handler (installed next, over it) can raise
        // KeyboardInterrupt through PyErr_SetInterruptEx.
        let take_sigint = !interrupt::sigint_ignored();
        // The signal module reads the handlers it reports (`signal.getsignal`) when it is first
        // imported: before memprof's SIGTERM handler goes in, so that the program sees the
        // default there, as under python, also when SIGINT was ignored (`nohup ... &`).
        let signal = py
            .import("signal")
            .map_err(|e| python_failure(py, "import signal", e))?;
        if take_sigint {
            signal
                .getattr("default_int_handler")
                .and_then(|handler| {
                    signal.call_method1("signal", (signal.getattr("SIGINT")?, handler))
                })
                .map_err(|e| python_failure(py, "set the SIGINT handler", e))?;
        }
        interrupt::install(take_sigint)?;

        let through_main = !program.module
            && boot
                .call_method1("main_in_archive_or_directory", (script_text.as_str(),))
                .and_then(|b| b.extract::<bool>())
                .map_err(|e| python_failure(py, "look at the script", e))?;
        let script_abs = if program.module || through_main {
            None
        } else {
            Some(
                std::path::absolute(&program.script)?
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        let options = Bound::new(py, program.options.clone())
            .map_err(|e| python_failure(py, "pass the options", e))?;
        boot.call_method1(
            "install",
            (program.targets.clone(), script_abs.clone(), options),
        )
        .map_err(|e| python_failure(py, "install the targets", e))?;

        let result = match &script_abs {
            Some(path) => {
                let code = compile_script(py, &boot, path)?;
                let globals = boot
                    .call_method1("prepare_main", (path,))
                    .map_err(|e| python_failure(py, "prepare __main__", e))?
                    .cast_into::<PyDict>()
                    .map_err(|_| Error::usage("__main__ has no dict"))?;
                interrupt::set_script_running(true);
                tracing::start_on_this_thread();
                eval(py, &code, &globals)
            }
            None => {
                // `-m module`, or a directory or zip archive with a `__main__` module.
                let runner = boot
                    .getattr(if program.module {
                        "run_module"
                    } else {
                        "run_archive_or_directory"
                    })
                    .map_err(|e| python_failure(py, "find the runner", e))?;
                let name = pyo3::types::PyString::new(py, &script_text);
                interrupt::set_script_running(true);
                tracing::start_on_this_thread();
                match call_one(py, &runner, name.as_any()) {
                    Ok(Some(not_found)) => {
                        interrupt::set_script_running(false);
                        tracing::stop_on_this_thread();
                        // As python says it and exits (1), before anything ran: nothing to report.
                        return Err(Error {
                            message: not_found,
                            hint: Some(if program.module {
                                "check the module's name, and that its package is on sys.path \
                                 (the current directory is)"
                                    .into()
                            } else {
                                "add a __main__.py to it, or pass the script inside it".into()
                            }),
                            code: exit_code::SCRIPT_RAISED,
                        });
                    }
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(err) = &result {
            // While the traceback still holds the failing frames and their tensors.
            let tb = err.traceback(py).map(|t| t.into_any().unbind());
            if let Err(e) = boot.call_method1("uncaught", (err.value(py), tb)) {
                e.write_unraisable(py, None);
            }
            let thread = tracing::current_thread();
            let ended = crate::capture::recorder::with(|r| {
                r.on_uncaught(thread);
                r.take_ended()
            })
            .flatten();
            if let Some(ended) = ended {
                let tb = err.traceback(py).map(|t| t.into_any());
                inventory::run(py, ended, tb.as_ref());
            }
        }
        let mut outcome = outcome_of(py, result);
        shutdown(py, &mut outcome);
        Ok(collect(py, &boot, outcome))
    })
}

/// The program (or an in-process session) has ended with `outcome`: every hook stops, and what
/// Python and the hooks know is gathered for the report.
pub(crate) fn collect(py: Python<'_>, boot: &Bound<'_, PyModule>, outcome: Outcome) -> RunFacts {
    // What the report's own work allocates is not the program's.
    crate::capture::peak::stop();
    interrupt::set_script_running(false);
    // An exception that ended the program left the main thread's targeted frames.
    let raised = matches!(outcome.status.as_str(), "exception" | "interrupted");
    let main_thread = tracing::current_thread();
    let stopped_early = crate::capture::recorder::with(|r| {
        r.stop(raised.then_some(main_thread));
        r.stopped_early()
    })
    .unwrap_or(false);
    let device_index = crate::capture::recorder::with(|r| r.sampler().device()).flatten();
    tracing::stop_on_this_thread();
    let _ = boot.call_method0("stop");
    let collected = match boot
        .call_method1("report", (device_index,))
        .and_then(|j| j.extract::<String>())
    {
        Ok(j) => Some(j),
        Err(e) => {
            e.display(py);
            None
        }
    };
    let mut warnings = Vec::new();
    if tracing::foreign_tracer_seen() {
        warnings.push(
            "the program installed its own trace function (sys.settrace, as coverage and \
             debuggers do), which replaces memprof's on Python 3.11: targeted calls that ran \
             under it were not measured; profile without that tracer, or on Python 3.12+ \
             where both work"
                .into(),
        );
    }
    warnings.extend(
        ext::WARNINGS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..),
    );
    // The same words whether or not the program imported torch, and in a report written
    // without Python's help (`versions`).
    let (torch_version, python_version) = match versions() {
        Some(v) => (v.torch.clone(), v.python.clone()),
        None => (
            py.import("sys")
                .and_then(|s| s.getattr("modules"))
                .and_then(|m| m.get_item("torch"))
                .and_then(|t| t.getattr("__version__"))
                .and_then(|v| v.str().map(|s| s.to_string()))
                .unwrap_or_else(|_| torch::linked_version()),
            python_version(py),
        ),
    };
    flush_stdio(py);
    RunFacts {
        outcome,
        python_version,
        torch_version,
        device_index,
        stopped_early,
        hook_events: tracing::hook_events(),
        warnings,
        collected,
    }
}

/// memprof's Python files: (module name, file name shown in tracebacks, source), in the order
/// they are loaded (the bootstrap imports the others by name).
const PY_FILES: [(&str, &str, &str); 18] = [
    ("_memprof_imports", "<memprof imports>", IMPORTS),
    ("_memprof_modules", "<memprof modules>", MODULES),
    ("_memprof_inventory", "<memprof inventory>", INVENTORY),
    ("_memprof_history", "<memprof history>", HISTORY),
    ("_memprof_oom", "<memprof oom>", OOM),
    ("_memprof_compiled", "<memprof compiled>", COMPILED),
    (
        "_memprof_compiled_modules",
        "<memprof compiled modules>",
        COMPILED_MODULES,
    ),
    ("_memprof_peak", "<memprof peak>", PEAK),
    ("_memprof_children", "<memprof children>", CHILDREN),
    (
        "_memprof_simulate_ledger",
        "<memprof simulate ledger>",
        SIMULATE_LEDGER,
    ),
    (
        "_memprof_simulate_device",
        "<memprof simulate device>",
        SIMULATE_DEVICE,
    ),
    (
        "_memprof_simulate_torch",
        "<memprof simulate torch>",
        SIMULATE_TORCH,
    ),
    ("_memprof_cudnn_sm90", "<memprof cudnn sm90>", CUDNN_SM90),
    (
        "_memprof_simulate_cudnn",
        "<memprof simulate cudnn>",
        SIMULATE_CUDNN,
    ),
    (
        "_memprof_simulate_compile",
        "<memprof simulate compile>",
        SIMULATE_COMPILE,
    ),
    (
        "_memprof_simulate_distributed",
        "<memprof simulate distributed>",
        SIMULATE_DISTRIBUTED,
    ),
    ("_memprof_simulate", "<memprof simulate>", SIMULATE),
    ("_memprof_bootstrap", "<memprof>", BOOTSTRAP),
];

/// Their code objects, compiled once per process (an in-process session loads them again at
/// each start; compiling them took 20 ms).
static CODES: std::sync::OnceLock<Vec<Py<PyAny>>> = std::sync::OnceLock::new();

/// memprof's Python side, loaded afresh (its modules' state is one run's or one session's):
/// the `_memprof` module, then each file executed as its module. Returns the bootstrap.
pub(crate) fn load_bootstrap(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = ext::create(py)?;
    py.import("sys")?
        .getattr("modules")?
        .set_item("_memprof", m)?;
    let codes = match CODES.get() {
        Some(codes) => codes,
        None => {
            let compile = py.import("builtins")?.getattr("compile")?;
            let codes = PY_FILES
                .iter()
                .map(|(_, file, source)| compile.call1((*source, *file, "exec")).map(Bound::unbind))
                .collect::<PyResult<Vec<_>>>()?;
            CODES.get_or_init(|| codes)
        }
    };
    let mut last = None;
    for ((name, file, _), code) in PY_FILES.iter().zip(codes) {
        let name = CString::new(*name).expect("no NUL");
        let file = CString::new(*file).expect("no NUL");
        // SAFETY: GIL held; a code object compiled above; PyImport_ExecCodeModuleEx returns a
        // new reference (or NULL with an exception set) and puts the module into sys.modules.
        let module = unsafe {
            let ptr = ffi::PyImport_ExecCodeModuleEx(name.as_ptr(), code.as_ptr(), file.as_ptr());
            Bound::from_owned_ptr_or_err(py, ptr)?
        };
        last = Some(module.cast_into::<PyModule>().map_err(PyErr::from)?);
    }
    Ok(last.expect("the bootstrap is loaded last"))
}

/// Prints a Python error raised by memprof's own code and turns it into a memprof error.
fn python_failure(py: Python<'_>, what: &str, err: PyErr) -> Error {
    err.display(py);
    Error::usage(format!("memprof could not {what} in the embedded Python"))
}

/// Where the script's `import torch` would load torch from, and its version (`version.py`),
/// without importing it.
fn torch_facts(py: Python<'_>) -> PyResult<Option<(String, Option<String>)>> {
    let spec = py
        .import("importlib.util")?
        .call_method1("find_spec", ("torch",))?;
    if spec.is_none() {
        return Ok(None);
    }
    let locations = spec.getattr("submodule_search_locations")?;
    if locations.is_none() {
        return Ok(None);
    }
    let Some(root) = locations.try_iter()?.next() else {
        return Ok(None);
    };
    let root: String = root?.extract()?;
    let version = std::fs::read_to_string(std::path::Path::new(&root).join("version.py"))
        .ok()
        .and_then(|text| {
            text.lines()
                .rev()
                .filter(|l| l.starts_with("__version__"))
                .find_map(|l| l.split_once('='))
                .map(|(_, v)| v.trim().trim_matches(['\'', '"']).to_string())
        });
    Ok(Some((root, version)))
}

/// Finds the torch the script will import (without importing it), loads memprof's library for
/// that release, and checks that the libtorch loaded is that torch's.
fn check_torch(py: Python<'_>) -> Result<()> {
    let facts = torch_facts(py).map_err(|e| python_failure(py, "find torch", e))?;
    let range = torch::releases::range();
    let Some((root, version)) = facts else {
        return Err(Error::usage(format!(
            "this Python ({}) has no torch; memprof needs torch {range}",
            py.import("sys")
                .and_then(|sys| sys.getattr("executable"))
                .and_then(|e| e.extract::<String>())
                .unwrap_or_else(|_| "python".into())
        ))
        .hint("activate the virtualenv that has your torch, or `pip install torch`"));
    };
    let version = version.unwrap_or_else(|| "unknown".into());
    let _ = VERSIONS.set(Versions {
        python: python_version(py),
        torch: version.clone(),
    });
    crate::capture::load_torch(std::path::Path::new(&root), &version)?;
    let expected = std::path::Path::new(&root).join("lib").join("libc10.so");
    if let Some(loaded) = torch::loaded_libc10() {
        let same = match (
            std::fs::canonicalize(&loaded),
            std::fs::canonicalize(&expected),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if !same {
            return Err(Error::usage(format!(
                "this process loaded libtorch from {loaded} before memprof, but the script's \
                 torch is {root}: two copies of libtorch in one process would not share the \
                 CUDA allocator"
            ))
            .hint("run the script with the python of the environment whose torch it imports"));
        }
    }
    Ok(())
}

fn compile_script<'py>(
    py: Python<'py>,
    boot: &Bound<'py, PyModule>,
    path: &str,
) -> Result<Bound<'py, PyAny>> {
    boot.call_method1("compile_script", (path,)).map_err(|e| {
        if e.is_instance_of::<PySyntaxError>(py) {
            // As python prints it: the file, the line and the caret, without memprof's frames.
            let printed = py.import("traceback").and_then(|t| {
                t.call_method1("print_exception", (e.get_type(py), e.value(py), py.None()))
            });
            if printed.is_err() {
                e.display(py);
            }
            Error::usage(format!(
                "'{path}' is not valid Python (the syntax error is shown above)"
            ))
            .hint("fix the script; `python -m py_compile` shows the same error")
        } else {
            e.display(py);
            Error::usage(format!("could not read '{path}'"))
        }
    })
}

fn eval(py: Python<'_>, code: &Bound<'_, PyAny>, globals: &Bound<'_, PyDict>) -> PyResult<()> {
    // SAFETY: code is a code object, globals a dict; the result is a new reference or NULL.
    let result = unsafe { ffi::PyEval_EvalCode(code.as_ptr(), globals.as_ptr(), globals.as_ptr()) };
    if result.is_null() {
        Err(fetch_whole(py))
    } else {
        // SAFETY: a new reference we own.
        unsafe { ffi::Py_DECREF(result) };
        Ok(())
    }
}

/// Calls `f(arg)` as the interpreter would, keeping the whole traceback of what it raises; the
/// string it returns, if any.
fn call_one(
    py: Python<'_>,
    f: &Bound<'_, PyAny>,
    arg: &Bound<'_, PyAny>,
) -> PyResult<Option<String>> {
    // SAFETY: both are live objects; the result is a new reference or NULL.
    let result = unsafe { ffi::PyObject_CallOneArg(f.as_ptr(), arg.as_ptr()) };
    if result.is_null() {
        return Err(fetch_whole(py));
    }
    // SAFETY: a new reference we own, handed to a Bound that releases it.
    let result = unsafe { Bound::from_owned_ptr(py, result) };
    Ok(result.extract::<String>().ok())
}

/// The raised exception with the traceback of every frame it left. On 3.11 the interpreter
/// keeps the frames an exception passed through beside it (PyErr_Fetch's traceback), not in its
/// `__traceback__`, which still ends where a chained exception was raised; PyO3 reads the
/// latter, so an error raised in an `except` block lost its callers. Setting `__traceback__`
/// first is what python's own top level does (3.12 keeps them together already).
fn fetch_whole(py: Python<'_>) -> PyErr {
    #[allow(deprecated)]
    // SAFETY: the error indicator is set (the call returned NULL); Fetch hands us its three
    // references, Normalize keeps them valid, Restore takes them back.
    unsafe {
        let (mut ty, mut value, mut tb) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        ffi::PyErr_Fetch(&mut ty, &mut value, &mut tb);
        ffi::PyErr_NormalizeException(&mut ty, &mut value, &mut tb);
        if !value.is_null() && !tb.is_null() {
            ffi::PyException_SetTraceback(value, tb);
        }
        ffi::PyErr_Restore(ty, value, tb);
    }
    PyErr::fetch(py)
}

/// Turns the script's result into an outcome, printing what Python would print.
fn outcome_of(py: Python<'_>, result: PyResult<()>) -> Outcome {
    let err = match result {
        Ok(()) => {
            return Outcome {
                status: "completed".into(),
                exit_code: 0,
                exception: None,
            }
        }
        Err(e) => e,
    };
    if err.is_instance_of::<PySystemExit>(py) {
        let code = err.value(py).getattr("code").ok();
        let exit_code = match code {
            None => 0,
            Some(c) if c.is_none() => 0,
            Some(c) => match c.extract::<i32>() {
                Ok(n) => n,
                Err(_) => {
                    // `sys.exit("message")` prints the message and exits 1, as python does.
                    if let Ok(text) = c.str() {
                        eprintln!("{text}");
                    }
                    1
                }
            },
        };
        let status = if exit_code == 0 { "completed" } else { "exit" };
        return Outcome {
            status: status.into(),
            exit_code,
            exception: None,
        };
    }
    let description = describe(py, &err);
    print_traceback(py, err.clone_ref(py));
    if err.is_instance_of::<PyKeyboardInterrupt>(py) {
        interrupt::end_by_sigint();
        return Outcome {
            status: "interrupted".into(),
            exit_code: interrupt::received().unwrap_or(exit_code::INTERRUPTED),
            exception: Some(description),
        };
    }
    Outcome {
        status: "exception".into(),
        exit_code: exit_code::SCRIPT_RAISED,
        exception: Some(description),
    }
}

fn describe(py: Python<'_>, err: &PyErr) -> String {
    let name = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    match err.value(py).str() {
        Ok(msg) if !msg.to_string().is_empty() => format!("{name}: {msg}"),
        _ => name,
    }
}

/// Prints the traceback through `sys.excepthook`, as the interpreter does.
fn print_traceback(py: Python<'_>, err: PyErr) {
    let ty = err.get_type(py);
    let value = err.value(py).clone();
    let tb = err.traceback(py);
    let hook = py.import("sys").and_then(|s| s.getattr("excepthook"));
    let printed = hook.and_then(|h| h.call1((ty, value, tb)));
    if printed.is_err() {
        err.display(py);
    }
}

/// What `Py_FinalizeEx` would run for the program: wait for non-daemon threads, then atexit.
fn shutdown(py: Python<'_>, outcome: &mut Outcome) {
    let threads = py
        .import("threading")
        .and_then(|t| t.call_method0("_shutdown"));
    if let Err(e) = threads {
        if e.is_instance_of::<PyKeyboardInterrupt>(py) && outcome.status == "completed" {
            *outcome = outcome_of(py, Err(e));
        }
    }
    let _ = py
        .import("atexit")
        .and_then(|a| a.call_method0("_run_exitfuncs"));
}

fn flush_stdio(py: Python<'_>) {
    if let Ok(sys) = py.import("sys") {
        for name in ["stdout", "stderr"] {
            if let Ok(stream) = sys.getattr(name) {
                let _ = stream.call_method0("flush");
            }
        }
    }
}
