//! `--tensors`: runs the Python tensor inventory (inventory.py, through the bootstrap) when a
//! targeted call ends, right after the hook has handed the event to the recorder and released it.
use crate::capture::recorder::{self, EndedCall};
use pyo3::prelude::*;
use std::sync::OnceLock;

/// The bootstrap's `inventory(qualname, call, raised, traceback)`, set when `--tensors` is on.
static INVENTORY: OnceLock<Py<PyAny>> = OnceLock::new();

#[pyfunction]
pub fn set_inventory(callback: Py<PyAny>) {
    let _ = INVENTORY.set(callback);
    recorder::with(|r| r.collect_ended_calls());
}

/// Takes the inventory for each call that ended; `traceback` is that of an exception that
/// ended the program, whose frames hold the variables that name tensors.
pub fn run(py: Python<'_>, ended: Vec<EndedCall>, traceback: Option<&Bound<'_, PyAny>>) {
    let Some(callback) = INVENTORY.get() else {
        return;
    };
    for call in ended {
        let Some(qualname) = recorder::with(|r| r.functions[call.func as usize].qualname.clone())
        else {
            return;
        };
        let tb = traceback
            .map(|t| t.clone().unbind())
            .unwrap_or_else(|| py.None());
        if let Err(e) = callback.call1(py, (qualname, call.call, call.raised, tb)) {
            e.write_unraisable(py, None);
        }
    }
}
