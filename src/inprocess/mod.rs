//! The in-process front end: the `memprof._native` Python extension, the same native core as
//! the command, loaded into an interpreter that is already running (`import memprof`, the
//! Jupyter magics, the pytest plugin; their Python halves are in src/wheel/memprof). A
//! `Session` measures what runs between its start and its stop and gives the report the
//! command would write, as JSON; `render` turns such a report into the command's table.
mod session;

use crate::model::profile::Profile;
use crate::render::Format;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A report's JSON text rendered as `format` (`table`, `yaml` or `json`) for a terminal of
/// `width` columns (None: whole, as for a file).
#[pyfunction]
#[pyo3(name = "render", signature = (report, format="table", width=None))]
fn render_report(report: &str, format: &str, width: Option<usize>) -> PyResult<String> {
    let profile: Profile = serde_json::from_str(report)
        .map_err(|e| PyValueError::new_err(format!("not a memprof run report: {e}")))?;
    let format = match format {
        "table" => Format::Table,
        "yaml" => Format::Yaml,
        "json" => Format::Json,
        "html" => Format::Html,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown format {other:?}: use table, yaml, json or html"
            )))
        }
    };
    Ok(crate::render::render_printed(
        &profile, format, width, false,
    ))
}

/// The `memprof` command run in this interpreter (the wheel's `memprof run`, through its
/// launcher): `args` without the program's name. The script runs here as `__main__`, as under
/// `python script.py`; the process exits with the command's exit code (never returns).
#[pyfunction]
fn cli(args: Vec<String>, long_version: String) {
    crate::cli_main(args, Box::leak(long_version.into_boxed_str()))
}

/// Loads memprof's library for the torch the program imported (`torch_root`: its package
/// folder), before any measuring; a torch memprof does not support raises, naming the range.
#[pyfunction]
fn load_torch(torch_root: String, torch_version: String) -> PyResult<()> {
    crate::capture::load_torch(std::path::Path::new(&torch_root), &torch_version)
        .map_err(session::to_py)
}

/// The module: `memprof._native` in the wheel (and in the development set-up).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<session::Session>()?;
    m.add_function(wrap_pyfunction!(session::start, m)?)?;
    m.add_function(wrap_pyfunction!(render_report, m)?)?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(load_torch, m)?)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add("PYTHON_VERSION", env!("MEMPROF_PYTHON_VERSION"))?;
    Ok(())
}
