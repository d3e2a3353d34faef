//! A Python tensor's TensorImpl address: read from the object by the shim
//! (src/torch/cpp/tensor_object.cpp) where the object's type is torch.Tensor or a subclass,
//! instead of Python's `_cdata` (an attribute lookup and a new int per tensor, on every module
//! call's arguments and outputs). The shim's answer is compared with `_cdata` once per process;
//! if they ever differed (a Python built with another object header), `_cdata` is read from
//! then on.
use pyo3::prelude::*;
use pyo3::types::PyType;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// torch.Tensor, once torch is loaded (`set_tensor_type`).
static TENSOR: OnceLock<Py<PyType>> = OnceLock::new();

/// Whether the shim's reading is trusted: not yet compared, trusted, or not.
const UNCHECKED: u8 = 0;
const TRUSTED: u8 = 1;
const ATTRIBUTE: u8 = 2;
static READING: AtomicU8 = AtomicU8::new(UNCHECKED);

/// torch.Tensor (the first call wins: it is one type per process).
pub fn set_tensor_type(tensor: Bound<'_, PyType>) {
    let _ = TENSOR.set(tensor.unbind());
}

/// torch.Tensor, once set.
pub fn tensor_type(py: Python<'_>) -> Option<&Bound<'_, PyType>> {
    TENSOR.get().map(|t| t.bind(py))
}

/// The address of `t`'s TensorImpl (what `t._cdata` says).
pub fn tensor_impl(t: &Bound<'_, PyAny>) -> PyResult<usize> {
    if let Some(address) = read_from_object(t) {
        return Ok(address);
    }
    attribute(t)
}

/// The address of `t`'s TensorImpl where `t` is a torch.Tensor (a type check, which runs no
/// Python): None for any other object, whose `_cdata` is not asked for.
pub fn tensor_impl_if_tensor(t: &Bound<'_, PyAny>) -> Option<usize> {
    if !is_tensor_object(t) {
        return None;
    }
    read_tensor_object(t).or_else(|| attribute(t).ok())
}

fn attribute(t: &Bound<'_, PyAny>) -> PyResult<usize> {
    t.getattr(pyo3::intern!(t.py(), "_cdata"))?.extract()
}

/// Whether `t`'s type is torch.Tensor or a subclass (a type check, which runs no Python: an
/// object that only claims the class through `__class__` is not a tensor object).
fn is_tensor_object(t: &Bound<'_, PyAny>) -> bool {
    tensor_type(t.py()).is_some_and(|tensor| {
        // SAFETY: both are live objects; PyObject_TypeCheck runs no Python.
        let checked = unsafe {
            pyo3::ffi::PyObject_TypeCheck(
                t.as_ptr(),
                tensor.as_ptr() as *mut pyo3::ffi::PyTypeObject,
            )
        };
        checked != 0
    })
}

/// The shim's reading, where `t` is a tensor object and the reading is trusted.
fn read_from_object(t: &Bound<'_, PyAny>) -> Option<usize> {
    is_tensor_object(t).then(|| read_tensor_object(t)).flatten()
}

/// The shim's reading of a tensor object `t`, where it is trusted (compared with `_cdata` the
/// first time).
fn read_tensor_object(t: &Bound<'_, PyAny>) -> Option<usize> {
    let state = READING.load(Ordering::Relaxed);
    if state == ATTRIBUTE {
        return None;
    }
    // SAFETY: `t` is a live instance of torch.Tensor, held by the caller.
    let address = unsafe { crate::torch::tensor_impl_of(t.as_ptr() as *const std::ffi::c_void) }?;
    if state == UNCHECKED {
        let agrees = attribute(t).ok() == Some(address);
        READING.store(if agrees { TRUSTED } else { ATTRIBUTE }, Ordering::Relaxed);
        if !agrees {
            return None;
        }
    }
    Some(address)
}
