//! The `_memprof` extension module that memprof puts into the embedded interpreter: target
//! registration, warnings, the thread-start hook, and (on 3.12+) the sys.monitoring callbacks.
//! The native halves of `--modules` (module_calls, saved), `--history` and `--tensors` beside it.
pub mod history;
mod impl_list;
pub mod inventory;
mod module_calls;
mod module_calls_fast;
pub mod saved;
mod saved_state;
mod tensor_object;
use crate::capture::recorder;
use crate::torch;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::Mutex;

/// Warnings raised while the script ran (shown in the report).
pub static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Registers a targeted code object with the recorder; true if it is new.
#[pyfunction]
fn register(
    code: &Bound<'_, PyAny>,
    target: String,
    qualname: String,
    file: String,
    first_line: u32,
    last_line: u32,
) -> bool {
    // The code object must outlive the run: its address is the recorder's key.
    let keep: Py<PyAny> = code.clone().unbind();
    let ptr = keep.as_ptr() as usize;
    let new = recorder::with(|r| r.register(ptr, qualname, file, (first_line, last_line), target))
        .unwrap_or(false);
    if new {
        crate::python::tracing::keep_alive(keep);
        #[cfg(not(Py_3_12))]
        crate::python::tracing::add_code(ptr);
    }
    new
}

/// The source text of a targeted code object whose file is not on disk (a zip archive's).
#[pyfunction]
fn set_source(code: &Bound<'_, PyAny>, text: String) {
    let ptr = code.as_ptr() as usize;
    recorder::with(|r| r.set_source(ptr, text));
}

/// The text of source files that are not on disk (notebook cells, `exec`'d strings), by file
/// name, as Python's linecache has it: what the report quotes of their lines.
static FILE_TEXTS: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

#[pyfunction]
fn file_texts(texts: HashMap<String, String>) {
    FILE_TEXTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .extend(texts);
}

/// The text of a source file that is not on disk, if Python had it.
pub fn file_text(file: &str) -> Option<String> {
    FILE_TEXTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|t| t.get(file).cloned())
}

/// Forgets the texts (an in-process session's end).
pub fn forget_file_texts() {
    *FILE_TEXTS.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Records a warning for the report.
#[pyfunction]
fn warn(message: String) {
    WARNINGS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(message);
}

/// The run's report so far, as JSON (None when there is none to give).
#[pyfunction]
fn report_so_far() -> Option<String> {
    crate::capture::so_far::report()
}

/// `os._exit(status)` is about to end the process without unwinding: the report first.
#[pyfunction]
fn before_os_exit(status: i32) {
    crate::capture::interrupt::write_emergency_report(&crate::capture::interrupt::Ending {
        status: "os_exit",
        exit_code: status,
        warning: format!(
            "the program called os._exit({status}), which skips every handler: this report was \
             written just before, from memprof's line data alone"
        ),
    });
}

/// This process was just forked from the run (`os.register_at_fork`): it measures its own.
#[pyfunction]
fn forked() {
    crate::capture::children::forked();
}

/// A forked child leaves through `os._exit(status)`: its report first.
#[pyfunction]
fn child_exit(status: i32) {
    crate::capture::children::child_exits(status);
}

/// The native core as a file a spawned child can load as the `memprof._native` extension: the
/// wheel's (loaded here), `MEMPROF_NATIVE`'s, or the `libmemprof.so` cargo built beside the
/// binary; None when there is none.
#[pyfunction]
fn native_library(py: Python<'_>) -> Option<String> {
    let loaded = py
        .import("sys")
        .and_then(|s| s.getattr("modules"))
        .and_then(|m| m.get_item("memprof._native"))
        .and_then(|m| m.getattr("__file__"))
        .and_then(|f| f.extract::<String>())
        .ok();
    let named = std::env::var("MEMPROF_NATIVE").ok();
    let beside = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("libmemprof.so"))
        .map(|p| p.to_string_lossy().into_owned());
    [loaded, named, beside]
        .into_iter()
        .flatten()
        .find(|p| std::path::Path::new(p).is_file())
}

/// Called on each new Python thread before its `run()`: libtorch's thread-local reporter is
/// not inherited, and on 3.10/3.11 the C trace function is per thread.
#[pyfunction]
fn thread_started(py: Python<'_>) -> PyResult<()> {
    torch::attach_reporter_to_thread();
    crate::python::tracing::on_thread_start(py)
}

/// Opens a module call's measurement window (src/capture/module_windows.rs): its id.
#[pyfunction]
fn scope_open() -> u64 {
    crate::capture::module_windows::open()
}

/// A scope's reading: allocated bytes at its start and end, the peak while it was open, and
/// with `--collectives` the collectives' bytes per kind (`torch::collectives::KINDS` order).
type Reading = (i64, i64, i64, Option<Vec<i64>>);

fn reading_of(s: crate::capture::module_windows::ScopeReading) -> Reading {
    let bytes = s
        .collectives
        .map(|c| c[..torch::collectives::KINDS.len()].to_vec());
    (s.start, s.end, s.peak, bytes)
}

/// Closes a window, or None for an unknown id.
#[pyfunction]
fn scope_close(id: u64) -> Option<Reading> {
    crate::capture::module_windows::close(id).map(reading_of)
}

/// What the process-group call about to run carries (`--collectives`); None after it.
#[pyfunction]
#[pyo3(signature = (kind, bytes=0))]
fn expect_collective(kind: Option<&str>, bytes: i64) {
    torch::collectives::expect(kind, bytes);
}

/// The CUDA device measured now (it follows the program's), or None on the CPU.
#[pyfunction]
fn measured_device() -> Option<i32> {
    recorder::with(|r| r.sampler().device()).flatten()
}

/// The program set its CUDA device (`torch.cuda.set_device`): with no `--device` and no measured
/// call open, the run follows it from now on (a rank's peak is its own device's, set before or
/// after CUDA started). Returns the device measured now.
#[pyfunction]
fn device_set() -> Option<i32> {
    recorder::with(|r| {
        r.follow_program_device();
        r.sampler().device()
    })
    .flatten()
}

/// Whether `--trace` records the device's allocations.
#[pyfunction]
fn allocation_trace_on() -> bool {
    crate::capture::peak::with(|t| t.traces()).unwrap_or(false)
}

/// `--trace` on CUDA, once the program has initialised it: the allocator's own trace entries
/// (requested sizes, streams) from now on. False where it cannot (the trace keeps block sizes).
/// Never raises: torch's lazy-init queue runs it.
#[pyfunction]
fn cuda_trace_attach() -> bool {
    allocation_trace_on() && torch::cuda_trace_enable(true)
}

/// `--modules`' names of its entries (by entry id), for the trace's allocations.
#[pyfunction]
fn name_trace_modules(names: Vec<String>) {
    crate::capture::peak::with(|t| t.name_trace_modules(names));
}

/// `--modules` on compiled models: (tag, allocations, bytes) of the compiled graphs' lines that
/// allocated, by the tags `py/compiled_modules.py` gave their lines.
#[pyfunction]
fn compiled_tag_totals() -> Vec<(u32, u64, i64, i64)> {
    crate::capture::peak::with(|t| t.tagged_totals()).unwrap_or_default()
}

/// The tracker's latest allocation serial (0 without a tracker).
#[pyfunction]
fn allocation_serial() -> u64 {
    crate::capture::peak::with(|t| t.serial()).unwrap_or(0)
}

/// A CUDA graph's capture (or a CUDA-graph tree's warm-up in its pool) that began after
/// allocation `since` ended: the blocks it allocated that are still live are its pool's.
#[pyfunction]
fn mark_graph_pool(since: u64) {
    crate::capture::peak::with(|t| t.mark_since(since, crate::capture::peak::Role::CudaGraphPool));
}

/// A CUDA graph's capture, or a CUDA-graph tree's warm-up in its pool, begins (`open`) or
/// ends: compiled graphs' allocations meanwhile are their pool's.
#[pyfunction]
fn graph_pool_window(open: bool) {
    crate::capture::peak::graph_pool_window(open);
}

/// A CUDA graph is being replayed.
#[pyfunction]
fn note_graph_replay() {
    crate::capture::peak::with(|t| t.note_graph_replay());
}

/// Whether a call the schedule measures is running (always, without `--warmup`/`--calls`).
#[pyfunction]
fn measuring() -> bool {
    recorder::with(|r| r.measuring()).unwrap_or(false)
}

/// The schedule is complete: stop recording and counting; the bootstrap switches its hooks off.
#[pyfunction]
fn stop_recording(py: Python<'_>) {
    recorder::with(|r| r.stop_early());
    torch::collectives::disable();
    crate::python::tracing::stop_on_all_threads(py);
}

/// The schedule's rule for the `n`th call of a root module (`--modules` without -f): whether it
/// is measured, and whether it is the last one measured.
#[pyfunction]
fn schedule_verdict(n: u64) -> (bool, bool) {
    recorder::with(|r| r.schedule_verdict(n)).unwrap_or((true, false))
}

/// allocated_bytes.all.current of the profiled device now.
#[pyfunction]
fn allocated_now() -> i64 {
    recorder::with(|r| r.allocated_now()).unwrap_or(0)
}

/// The live blocks of the profiled device: (address, allocation serial).
#[pyfunction]
fn live_blocks() -> Vec<(u64, u64)> {
    crate::capture::peak::with(|t| t.live_blocks()).unwrap_or_default()
}

/// Where the live block at `ptr` was allocated, if by a targeted line: (qualname, file, line).
#[pyfunction]
fn created_at(ptr: usize) -> Option<(String, String, u32)> {
    recorder::with(|r| r.created_at(ptr)).flatten()
}

/// Creates the module.
pub fn create(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "_memprof")?;
    m.add_function(wrap_pyfunction!(register, &m)?)?;
    m.add_function(wrap_pyfunction!(warn, &m)?)?;
    m.add_function(wrap_pyfunction!(file_texts, &m)?)?;
    m.add_function(wrap_pyfunction!(set_source, &m)?)?;
    m.add_function(wrap_pyfunction!(before_os_exit, &m)?)?;
    m.add_function(wrap_pyfunction!(thread_started, &m)?)?;
    m.add_function(wrap_pyfunction!(forked, &m)?)?;
    m.add_function(wrap_pyfunction!(child_exit, &m)?)?;
    m.add_function(wrap_pyfunction!(report_so_far, &m)?)?;
    m.add_function(wrap_pyfunction!(native_library, &m)?)?;
    m.add_function(wrap_pyfunction!(scope_open, &m)?)?;
    m.add_function(wrap_pyfunction!(scope_close, &m)?)?;
    m.add_function(wrap_pyfunction!(measured_device, &m)?)?;
    m.add_function(wrap_pyfunction!(device_set, &m)?)?;
    m.add_function(wrap_pyfunction!(measuring, &m)?)?;
    m.add_function(wrap_pyfunction!(allocation_trace_on, &m)?)?;
    m.add_function(wrap_pyfunction!(cuda_trace_attach, &m)?)?;
    m.add_function(wrap_pyfunction!(name_trace_modules, &m)?)?;
    m.add_function(wrap_pyfunction!(compiled_tag_totals, &m)?)?;
    m.add_function(wrap_pyfunction!(allocation_serial, &m)?)?;
    m.add_function(wrap_pyfunction!(mark_graph_pool, &m)?)?;
    m.add_function(wrap_pyfunction!(note_graph_replay, &m)?)?;
    m.add_function(wrap_pyfunction!(graph_pool_window, &m)?)?;
    m.add_function(wrap_pyfunction!(expect_collective, &m)?)?;
    m.add_function(wrap_pyfunction!(stop_recording, &m)?)?;
    m.add_function(wrap_pyfunction!(schedule_verdict, &m)?)?;
    m.add_function(wrap_pyfunction!(allocated_now, &m)?)?;
    m.add_function(wrap_pyfunction!(live_blocks, &m)?)?;
    m.add_function(wrap_pyfunction!(created_at, &m)?)?;
    m.add_function(wrap_pyfunction!(inventory::set_inventory, &m)?)?;
    m.add_function(wrap_pyfunction!(crate::python::sites::sites_start, &m)?)?;
    m.add_function(wrap_pyfunction!(crate::python::sites::mark_roles, &m)?)?;
    m.add_function(wrap_pyfunction!(
        crate::python::sites::optimizer_stepped,
        &m
    )?)?;
    m.add_function(wrap_pyfunction!(
        crate::python::sites::register_compiled,
        &m
    )?)?;
    m.add_class::<crate::python::sites::BackwardEntry>()?;
    m.add_function(wrap_pyfunction!(history::history_events, &m)?)?;
    m.add_function(wrap_pyfunction!(history::history_recording, &m)?)?;
    m.add_function(wrap_pyfunction!(history::history_label, &m)?)?;
    m.add_function(wrap_pyfunction!(history::history_stacks, &m)?)?;
    m.add_function(wrap_pyfunction!(history::targeted_functions, &m)?)?;
    saved::add_functions(&m)?;
    module_calls::add_functions(&m)?;
    module_calls_fast::add_functions(&m)?;
    crate::python::tracing::add_functions(&m)?;
    Ok(m)
}
