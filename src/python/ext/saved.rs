//! `--modules`' bytes saved for backward, the Python side. `saved_interpose` makes memprof stand
//! in for SavedVariable's constructor (src/torch/cpp/saved_interpose.cpp: no hook, autograd
//! saves as without memprof). Where it cannot, or MEMPROF_SAVED_HOOKS asks, saved-tensors
//! hooks count instead: `_memprof.saved_pack`/`saved_unpack`, which modules.py pushes while a
//! root module's forward runs, as native functions (no Python frame), and `saved_native`, which
//! lets C++ hooks take their place where they top the hook stack (src/torch/cpp/saved_hooks.cpp).
//! All count through src/capture/saved.rs; a root call begins a pass (`saved_begin`, which reads
//! the storages of the root's parameters and buffers, found or kept by saved_state.rs). An
//! `nn.Parameter`, or a view of one, never counts (one check here, for all).
use super::saved_state;
use crate::capture::{prefetch, saved};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use std::cell::RefCell;
use std::os::raw::c_int;
use std::sync::{Mutex, OnceLock};

/// `torch.nn.Parameter`: a saved tensor of this type is a parameter, not an activation.
static PARAMETER: OnceLock<Py<PyType>> = OnceLock::new();

/// The pack hook object the native hooks stand in for, while they are on.
static NATIVE_MARKER: Mutex<Option<Py<PyAny>>> = Mutex::new(None);

/// A root module call starts a forward pass on this thread. `modules` are weak references to
/// the root's modules (one that is gone is passed over): the storages of their parameters and
/// buffers are state, not saved activations, as is any saved tensor of type `parameter`
/// (`torch.nn.Parameter`, or a subclass). The storages are read at each root call, as they are
/// then (FSDP2 and `.to()` swap them), from the objects saved_state.rs finds or kept.
/// `interposed`: the stand-in for SavedVariable's constructor counts what this pass saves.
#[pyfunction]
#[pyo3(signature = (modules, device_index, parameter, interposed=false))]
fn saved_begin(
    modules: &Bound<'_, PyTuple>,
    device_index: Option<c_int>,
    parameter: Bound<'_, PyType>,
    interposed: bool,
) {
    let py = modules.py();
    let device_index = device_index.unwrap_or(-1);
    if PARAMETER.get().is_none() {
        let _ = PARAMETER.set(parameter.unbind());
        saved::set_parameter_check(is_parameter);
    }
    let mut skip = saved::spare_set();
    let root = saved_state::root_objects(modules);
    // The root's state is out of the cache at its call (the last step's work came between), and
    // read object by object, then tensor by tensor, it was a chain of misses to memory: the
    // objects are asked for first (prefetched), then for their TensorImpls, whose storages the
    // shim reads in passes that prefetch each other's (`storages_on`).
    root.objects
        .iter()
        .for_each(|&object| prefetch::line(object as *const u8));
    STATE_READS.with(|reads| {
        let (impls, storages) = &mut *reads.borrow_mut();
        impls.clear();
        for &object in root.objects.iter() {
            // SAFETY: each object is alive while `root` is (held by its dict, or by `root`);
            // it is only borrowed here.
            let t = unsafe { Bound::from_borrowed_ptr(py, object as *mut pyo3::ffi::PyObject) };
            // Only a tensor is asked (no Python runs that could change the dicts meanwhile).
            if let Some(impl_ptr) = super::tensor_object::tensor_impl_if_tensor(&t) {
                impls.push(impl_ptr);
            }
        }
        // SAFETY: each TensorImpl is its object's, alive while `root` is (above).
        unsafe { storages.read(impls, device_index) };
        skip.extend(storages.counted());
    });
    saved::begin(device_index, skip, interposed);
}

thread_local! {
    /// A root call's TensorImpls and their storages, read into buffers kept from root call to
    /// root call (`Storages`). Nothing in the reading runs Python, so no root call starts while
    /// they are borrowed.
    static STATE_READS: RefCell<(Vec<usize>, crate::torch::Storages)> =
        RefCell::new((Vec::new(), crate::torch::Storages::default()));
}

/// The session ends: the roots' state is forgotten, and their dicts no longer watched.
#[pyfunction]
fn saved_forget(py: Python<'_>) {
    saved_state::forget(py);
}

/// Makes memprof stand in for SavedVariable's constructor in torch's libraries (true), so that
/// passes begun with `interposed` count what autograd saves without any hook, or stops (false).
/// True when it stands in; false when torch's libraries could not be read (hooks count then).
#[pyfunction]
fn saved_interpose(on: bool) -> bool {
    // SAFETY: torch is loaded (modules.py calls this at a module's first call).
    unsafe { crate::torch::saved_interpose(on) }
}

/// The address of a tensor's TensorImpl (what its `_cdata` says).
pub fn tensor_impl(t: &Bound<'_, PyAny>) -> PyResult<usize> {
    super::tensor_object::tensor_impl(t)
}

/// Turns the native hooks on where `pack` (this module's `saved_pack`, as modules.py pushes it)
/// tops a thread's hook stack, or off (None). True when they are on; false when this process's
/// autograd engine cannot take them (the Python hooks then run as pushed).
#[pyfunction]
#[pyo3(signature = (pack))]
fn saved_native(pack: Option<Bound<'_, PyAny>>) -> bool {
    let mut marker = NATIVE_MARKER.lock().unwrap_or_else(|e| e.into_inner());
    let address = pack.as_ref().map_or(0, |p| p.as_ptr() as usize);
    // SAFETY: torch is loaded (modules.py calls this at a module's first call); the marker is
    // kept alive below while the hooks are on.
    let on = unsafe { crate::torch::native_saved_hooks(address) };
    *marker = if on { pack.map(Bound::unbind) } else { None };
    on
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
    // SAFETY: `_cdata` is the address of the tensor's TensorImpl, alive while `t` is.
    let (found, version, ptr, nbytes) =
        unsafe { crate::torch::saved_info(impl_ptr, saved::device_index()) };
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
        saved::count(ptr, nbytes, || is_parameter(impl_ptr));
    }
    PyTuple::new(py, [kept, version.into_pyobject(py)?.into_any()])
}

/// Whether a saved tensor (its TensorImpl) is a parameter or a view of one (autograd saves
/// `weight.t()` for a linear layer), for both hooks (src/capture/saved.rs asks the native one's
/// for a storage the pass has not seen): the type of its Python object, or of its base's, is
/// `torch.nn.Parameter` or a subclass (a type check, not isinstance, whose metaclass would run
/// Python). A tensor without a Python object, such as an op's fresh output, is no parameter.
fn is_parameter(tensor_impl: usize) -> bool {
    // SAFETY: autograd holds the tensor while it calls the pack hook.
    let Some((obj, base)) = (unsafe { crate::torch::tensor_pyobjs(tensor_impl) }) else {
        return false;
    };
    [obj, base]
        .into_iter()
        .filter(|&p| p != 0)
        // SAFETY: a live Python object of a tensor autograd holds; its type is only read.
        .any(|p| type_is_parameter(unsafe { pyo3::ffi::Py_TYPE(p as *mut pyo3::ffi::PyObject) }))
}

/// Whether a tensor type is `nn.Parameter` or a subclass, by type object: the answers are kept,
/// with a reference to each type (so that its address is never another type's), and a type seen
/// before (torch.Tensor, nn.Parameter: nearly every saved tensor's) is answered without the GIL.
/// torch's Python bindings release the GIL around an op, so the pack hook runs without it.
fn type_is_parameter(ty: *mut pyo3::ffi::PyTypeObject) -> bool {
    static KNOWN: Mutex<Vec<(usize, bool, Py<PyType>)>> = Mutex::new(Vec::new());
    let key = ty as usize;
    let known = |k: &Vec<(usize, bool, Py<PyType>)>| {
        k.iter().find(|(t, _, _)| *t == key).map(|(_, yes, _)| *yes)
    };
    if let Some(yes) = known(&KNOWN.lock().unwrap_or_else(|e| e.into_inner())) {
        return yes;
    }
    // SAFETY: PyGILState_Ensure makes this thread hold the GIL until the Release below.
    let gil = unsafe { pyo3::ffi::PyGILState_Ensure() };
    // SAFETY: this thread holds the GIL (just above).
    let py = unsafe { Python::assume_attached() };
    // SAFETY: `ty` is the type of a live object; borrowed, then owned by the list.
    let ty = unsafe { Bound::from_borrowed_ptr(py, ty.cast::<pyo3::ffi::PyObject>()) };
    let yes = match (ty.cast::<PyType>(), PARAMETER.get()) {
        (Ok(t), Some(parameter)) => t.is_subclass(parameter.bind(py)).unwrap_or(false),
        _ => false,
    };
    if let Ok(t) = ty.cast_into::<PyType>() {
        let mut k = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
        if known(&k).is_none() {
            k.push((key, yes, t.unbind()));
        }
    }
    // SAFETY: pairs with the Ensure above; nothing of Python is held past it but the list's
    // references, which are never dropped.
    unsafe { pyo3::ffi::PyGILState_Release(gil) };
    yes
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
    m.add_function(wrap_pyfunction!(saved_forget, m)?)?;
    m.add_function(wrap_pyfunction!(saved_pack, m)?)?;
    m.add_function(wrap_pyfunction!(saved_unpack, m)?)?;
    m.add_function(wrap_pyfunction!(saved_native, m)?)?;
    m.add_function(wrap_pyfunction!(saved_interpose, m)?)?;
    Ok(())
}
