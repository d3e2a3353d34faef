//! `--modules`' saved-tensors hooks as native functions (`_memprof.saved_pack`/`saved_unpack`):
//! autograd calls the pack hook for every tensor it saves in a measured forward and the unpack
//! hook for each in backward, so they skip the Python frame, and the bytes each module call saves
//! are counted here. Per thread, as torch's hooks and the tracker's call stacks are: a root
//! module call begins a pass (`saved_begin`, which reads the storages of the root's parameters
//! and buffers, which are not activations), each call reads the pass's running total when it starts
//! and ends (`pass_bytes`, from module_calls.rs: a call's saved bytes include its children's),
//! and the root's end ends it (`end_pass`). A storage counts once per pass, on the measured
//! device only; an `nn.Parameter` never counts, nor takes a place in that set (FSDP2 swaps in
//! gathered parameters after the root call began, and frees them after each layer's forward, so
//! their storages' addresses are reused by later activations).
use crate::capture::int_hash::IntSet;
use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};
use std::cell::RefCell;
use std::os::raw::c_int;

struct Pass {
    /// -1: the CPU; else the CUDA device measured.
    device_index: c_int,
    /// `torch.nn.Parameter`: a saved tensor of this type is a parameter, not an activation.
    parameter: Py<PyType>,
    /// The root's parameters and buffers, and what the pass has counted already.
    skip: IntSet<usize>,
    bytes: u64,
}

thread_local! {
    static PASS: RefCell<Option<Pass>> = const { RefCell::new(None) };
}

/// A root module call starts a forward pass on this thread. `modules` are the root's modules:
/// their parameters and buffers are state, not saved activations, as is any saved tensor of
/// type `parameter` (`torch.nn.Parameter`, or a subclass).
#[pyfunction]
#[pyo3(signature = (modules, device_index, parameter))]
fn saved_begin(
    modules: &Bound<'_, PyList>,
    device_index: Option<c_int>,
    parameter: Bound<'_, PyType>,
) {
    let device_index = device_index.unwrap_or(-1);
    let mut skip = IntSet::default();
    for module in modules.iter() {
        for field in [
            intern!(module.py(), "_parameters"),
            intern!(module.py(), "_buffers"),
        ] {
            let Ok(tensors) = module.getattr(field) else {
                continue;
            };
            let Ok(tensors) = tensors.cast_into::<PyDict>() else {
                continue;
            };
            for (_, t) in tensors.iter() {
                let Ok(impl_ptr) = tensor_impl(&t) else {
                    continue;
                };
                // SAFETY: `t` is held by the module's dict, alive during the call.
                if let Some((ptr, _)) = unsafe { storage_on(impl_ptr, device_index) } {
                    skip.insert(ptr);
                }
            }
        }
    }
    PASS.with(|p| {
        *p.borrow_mut() = Some(Pass {
            device_index,
            parameter: parameter.unbind(),
            skip,
            bytes: 0,
        })
    });
}

/// The bytes this thread's pass has saved so far.
pub fn pass_bytes() -> u64 {
    PASS.with(|p| p.borrow().as_ref().map_or(0, |p| p.bytes))
}

/// The root call ended: nothing is counted on this thread until the next one.
pub fn end_pass() {
    PASS.with(|p| *p.borrow_mut() = None);
}

/// The storage (address, bytes) of the tensor whose TensorImpl is at `tensor_impl`, when it is
/// on the measured device (-1: the CPU) and has one.
///
/// # Safety
/// `tensor_impl` must be the TensorImpl of a tensor that stays alive during the call.
pub unsafe fn storage_on(tensor_impl: usize, device_index: c_int) -> Option<(usize, u64)> {
    // SAFETY: per the contract above.
    let (found, _, ptr, nbytes) = unsafe { crate::torch::saved_info(tensor_impl, device_index) };
    (found == 1).then_some((ptr, nbytes))
}

/// The address of a tensor's TensorImpl (its `_cdata`).
pub fn tensor_impl(t: &Bound<'_, PyAny>) -> PyResult<usize> {
    t.getattr(pyo3::intern!(t.py(), "_cdata"))?.extract()
}

/// The pack hook: counts the tensor's storage, and keeps the tensor with its version, as
/// autograd does without a hook (so that unpack can raise its in-place error). A tensor with a
/// grad_fn is kept as `t.detach()`: the same storage and version counter without `t`'s graph. A
/// node's own output kept as itself would hold the node (output -> grad_fn -> saved -> output),
/// a cycle that no one frees when no backward runs (a forward with grad enabled, as in
/// evaluation without no_grad): autograd keeps its own saved outputs without their grad_fn for
/// that reason, and on unpack gives the tensor its place in the graph again, as it does here.
/// A tensor without one (a weight, a buffer, the batch, an op's non-differentiable output such
/// as batch norm's saved mean: most of what a convolutional network saves) holds no node and is
/// kept as itself, as autograd keeps it, without the cost of a detach.
#[pyfunction]
fn saved_pack<'py>(t: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let py = t.py();
    let impl_ptr = tensor_impl(t)?;
    let device_index = PASS.with(|p| p.borrow().as_ref().map_or(-1, |p| p.device_index));
    // SAFETY: `_cdata` is the address of the tensor's TensorImpl, alive while `t` is.
    let (found, version, ptr, nbytes) = unsafe { crate::torch::saved_info(impl_ptr, device_index) };
    if found < 0 {
        // Python raises torch's own error (an inference tensor has no version).
        let v = t.getattr(pyo3::intern!(py, "_version"))?;
        return PyTuple::new(py, [t.clone(), v]);
    }
    // SAFETY: as above.
    let kept = if unsafe { crate::torch::holds_no_node(impl_ptr) } {
        t.clone()
    } else {
        t.call_method0(pyo3::intern!(py, "detach"))?
    };
    if found == 1 {
        // A storage the pass skips or has counted needs no more; else the type check, outside
        // the borrow (it reads an attribute of the tensor).
        let parameter = PASS.with(|p| match p.borrow().as_ref() {
            Some(p) if !p.skip.contains(&ptr) => Some(p.parameter.clone_ref(py)),
            _ => None,
        });
        if let Some(parameter) = parameter {
            if !is_parameter(t, parameter.bind(py))? {
                PASS.with(|p| {
                    if let Some(p) = p.borrow_mut().as_mut() {
                        if p.skip.insert(ptr) {
                            p.bytes += nbytes;
                        }
                    }
                });
            }
        }
    }
    PyTuple::new(py, [kept, version.into_pyobject(py)?.into_any()])
}

/// Whether a saved tensor is a parameter (of type `parameter`) or a view of one (autograd saves
/// `weight.t()` for a linear layer): FSDP2's gathered parameters are not among the storages the
/// pass skips from its start. A type check, not isinstance, whose metaclass would run Python.
fn is_parameter(t: &Bound<'_, PyAny>, parameter: &Bound<'_, PyType>) -> PyResult<bool> {
    if t.get_type().is_subclass(parameter)? {
        return Ok(true);
    }
    let base = t.getattr(intern!(t.py(), "_base"))?;
    Ok(!base.is_none() && base.get_type().is_subclass(parameter)?)
}

/// The unpack hook: the saved tensor, or the error autograd raises when it was modified in place
/// since it was saved (autograd skips its own check when a hook is set).
#[pyfunction]
fn saved_unpack<'py>(packed: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
    let py = packed.py();
    let t = packed.get_item(0)?;
    let saved: i64 = packed.get_item(1)?.extract()?;
    let now: i64 = t.getattr(pyo3::intern!(py, "_version"))?.extract()?;
    if now == saved {
        return Ok(t);
    }
    let kind: String = t.call_method0("type")?.extract()?;
    let shape: Vec<i64> = t.getattr("shape")?.extract()?;
    Err(PyRuntimeError::new_err(format!(
        "one of the variables needed for gradient computation has been modified by an inplace \
         operation: [{kind} {shape:?}] is at version {now}; expected version {saved} instead. \
         (memprof --modules reports this through its saved-tensors hook; the same program fails \
         without memprof.)"
    )))
}

pub fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(saved_begin, m)?)?;
    m.add_function(wrap_pyfunction!(saved_pack, m)?)?;
    m.add_function(wrap_pyfunction!(saved_unpack, m)?)?;
    Ok(())
}
