//! The line that runs a backward pass, for the allocations autograd's device threads make for it
//! (they run no Python, so their own frames say nothing). torch's `loss.backward()` and
//! `torch.autograd.grad` both reach `torch.autograd._engine_run_backward`; memprof puts this
//! callable in its place, which notes the caller's site on the thread's allocation reporter
//! (autograd hands that reporter to its threads) and calls the original. It is native, so a
//! traceback through it shows no extra frame.
use crate::capture::peak;
use crate::torch;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

#[pyclass(module = "_memprof")]
pub struct BackwardEntry {
    original: Py<PyAny>,
}

#[pymethods]
impl BackwardEntry {
    #[new]
    fn new(original: Py<PyAny>) -> Self {
        BackwardEntry { original }
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let site = super::site_here().site;
        let since = peak::with(|t| t.backward_started(site)).unwrap_or(u64::MAX);
        let previous = torch::set_backward_site(site);
        let result = self.original.call(py, args.clone(), kwargs);
        torch::set_backward_site(previous);
        peak::with(|t| t.mark_gradients(since));
        result
    }

    /// The function it stands in for (memprof puts it back at the end).
    #[getter]
    fn __wrapped__(&self, py: Python<'_>) -> Py<PyAny> {
        self.original.clone_ref(py)
    }
}
