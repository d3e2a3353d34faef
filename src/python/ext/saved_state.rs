//! A root module's state for `--modules`' saved bytes: the Python objects in its modules'
//! `_parameters` and `_buffers` dicts (src/capture/saved.rs's `RootState`), which are not
//! activations when autograd saves them. Read at a root call, and kept for the root's later
//! calls while none of those dicts has changed since: on Python 3.12+ memprof watches them
//! (`PyDict_AddWatcher`; one watcher for parameter dicts, one for buffer dicts, each advancing
//! its kind's generation at any change). Where it cannot watch (3.11, or the interpreter's
//! watchers all taken) each root call reads them again.
//!
//! Why objects, and why kept: a saved tensor is told by its Python object (or its view base's),
//! which a module's dict holds, rather than by the storage under it. Reading every parameter's
//! and buffer's storage at each root call cost ResNet-50's step a walk of some 1,800 objects
//! (modules, their dicts, the tensors, their TensorImpls and storages) that the step had left
//! cold, before its first kernel; an object found in a dict names the tensor while the dict holds
//! it, whatever storage it gets (`.data`, `.to()` in place), and a dict that changes says so.
use crate::capture::int_hash::IntMap;
use crate::capture::saved::{RootState, StateKind};
use crate::python::c_api::python_function;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple, PyWeakrefReference};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The dict watchers' ids, parameters' and buffers' (-1: none).
static WATCHERS: [AtomicI32; 2] = [AtomicI32::new(-1), AtomicI32::new(-1)];
/// Advanced by every change to a watched dict of that kind (and when the watchers go).
static GENERATIONS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

type WatchCallback =
    extern "C" fn(c_int, *mut ffi::PyObject, *mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

extern "C" fn on_parameters_changed(
    _event: c_int,
    _dict: *mut ffi::PyObject,
    _key: *mut ffi::PyObject,
    _value: *mut ffi::PyObject,
) -> c_int {
    GENERATIONS[StateKind::Parameter as usize].fetch_add(1, Ordering::AcqRel);
    0
}

extern "C" fn on_buffers_changed(
    _event: c_int,
    _dict: *mut ffi::PyObject,
    _key: *mut ffi::PyObject,
    _value: *mut ffi::PyObject,
) -> c_int {
    GENERATIONS[StateKind::Buffer as usize].fetch_add(1, Ordering::AcqRel);
    0
}

/// The roots read, by the tuple of weak references to their modules that modules.py passes
/// (made once per root), with their state.
struct Kept {
    modules: Py<PyTuple>,
    state: Arc<RootState>,
}

static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
/// Roots kept at most (a program has one or a few; the oldest goes first).
const KEPT_ROOTS: usize = 8;

fn watching() -> bool {
    WATCHERS.iter().all(|w| w.load(Ordering::Acquire) >= 0)
}

/// Adds the two dict watchers, once (the GIL held); neither where both cannot be had.
fn watch(py: Python<'_>) {
    if watching() {
        return;
    }
    let Some(found) = python_function(c"PyDict_AddWatcher") else {
        return;
    };
    type AddWatcher = unsafe extern "C" fn(WatchCallback) -> c_int;
    // SAFETY: PyDict_AddWatcher has this signature where it exists (3.12+); the GIL is held.
    let add = unsafe { std::mem::transmute::<*mut c_void, AddWatcher>(found) };
    let callbacks: [WatchCallback; 2] = [on_parameters_changed, on_buffers_changed];
    for (slot, callback) in WATCHERS.iter().zip(callbacks) {
        // SAFETY: as above.
        let id = unsafe { add(callback) };
        if id < 0 {
            drop(PyErr::take(py));
            forget(py);
            return;
        }
        slot.store(id, Ordering::Release);
    }
}

/// Takes the watchers off and forgets every root read (an in-process session's end: nothing of
/// memprof stays in the program). The GIL held.
pub fn forget(py: Python<'_>) {
    let kept = std::mem::take(&mut *KEPT.lock().unwrap_or_else(|e| e.into_inner()));
    // Dropped here, with the GIL held and the lock not.
    drop(kept);
    for (slot, generation) in WATCHERS.iter().zip(&GENERATIONS) {
        generation.fetch_add(1, Ordering::AcqRel);
        let id = slot.swap(-1, Ordering::AcqRel);
        if id < 0 {
            continue;
        }
        // PyDict_ClearWatcher exists where PyDict_AddWatcher gave `id`.
        if let Some(found) = python_function(c"PyDict_ClearWatcher") {
            type ClearWatcher = unsafe extern "C" fn(c_int) -> c_int;
            // SAFETY: its signature; the GIL is held.
            let clear = unsafe { std::mem::transmute::<*mut c_void, ClearWatcher>(found) };
            // SAFETY: as above.
            if unsafe { clear(id) } < 0 {
                drop(PyErr::take(py));
            }
        }
    }
}

/// Whether the objects of `kind` in `state` are still their dicts' (no watched dict of that
/// kind has changed since they were read). Without watchers, state read at this root call is
/// trusted for its pass, as the storages read at each root call were.
pub fn trusted(state: &RootState, kind: StateKind) -> bool {
    !watching()
        || GENERATIONS[kind as usize].load(Ordering::Acquire) == state.generations[kind as usize]
}

/// The state of the root whose modules `modules` (weak references) are: kept from an earlier
/// root call while every dict it was read from is watched and unchanged, else read now.
pub fn root_state(modules: &Bound<'_, PyTuple>) -> Arc<RootState> {
    let py = modules.py();
    watch(py);
    if watching() {
        let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        let found = kept.iter().find(|k| k.modules.bind(py).is(modules));
        if let Some(k) = found.filter(|k| {
            trusted(&k.state, StateKind::Parameter) && trusted(&k.state, StateKind::Buffer)
        }) {
            return Arc::clone(&k.state);
        }
    }
    // The generations before the dicts are read: a change while they are makes them stale.
    let generations = [0, 1].map(|kind| GENERATIONS[kind].load(Ordering::Acquire));
    let (objects, all_watched) = read(modules);
    let state = Arc::new(RootState {
        objects,
        generations,
    });
    if watching() && all_watched {
        let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|k| !k.modules.bind(py).is(modules));
        if kept.len() >= KEPT_ROOTS {
            kept.remove(0);
        }
        kept.push(Kept {
            modules: modules.clone().unbind(),
            state: Arc::clone(&state),
        });
    }
    state
}

/// The objects in the `_parameters` and `_buffers` of the modules still alive, each dict
/// watched (where watchers are on); and whether every dict could be.
fn read(modules: &Bound<'_, PyTuple>) -> (IntMap<usize, StateKind>, bool) {
    let py = modules.py();
    let watch = python_function(c"PyDict_Watch").filter(|_| watching());
    type Watch = unsafe extern "C" fn(c_int, *mut ffi::PyObject) -> c_int;
    // SAFETY: PyDict_Watch has this signature where it exists (3.12+).
    let watch = watch.map(|f| unsafe { std::mem::transmute::<*mut c_void, Watch>(f) });
    let mut objects = IntMap::default();
    let mut all_watched = true;
    let alive = modules.iter().filter_map(|m| {
        m.cast_into::<PyWeakrefReference>()
            .ok()
            .and_then(|r| r.upgrade())
    });
    for module in alive {
        for (field, kind) in [
            (intern!(py, "_parameters"), StateKind::Parameter),
            (intern!(py, "_buffers"), StateKind::Buffer),
        ] {
            let Some(dict) = instance_attribute(&module, field) else {
                continue;
            };
            let Ok(dict) = dict.cast_into::<PyDict>() else {
                continue;
            };
            if let Some(watch) = watch {
                let id = WATCHERS[kind as usize].load(Ordering::Acquire);
                // SAFETY: a live dict; the GIL is held.
                if unsafe { watch(id, dict.as_ptr()) } < 0 {
                    drop(PyErr::take(py));
                    all_watched = false;
                }
            }
            for (_, value) in dict.iter() {
                // A module without a bias holds None in its place.
                if !value.is_none() {
                    objects.insert(value.as_ptr() as usize, kind);
                }
            }
        }
    }
    (objects, all_watched)
}

/// `obj.name`, looked up as `object.__getattribute__` does: a module's `_parameters` is in its
/// instance dict, and nn.Module's Python `__getattr__` (asked only when that fails) costs a type
/// lookup on every access through Python's own getattr. Where that fails, Python's getattr.
fn instance_attribute<'py>(
    obj: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> Option<Bound<'py, PyAny>> {
    let py = obj.py();
    // SAFETY: both are live objects; the call returns a new reference, or null with an
    // exception set (taken below).
    let found = unsafe { ffi::PyObject_GenericGetAttr(obj.as_ptr(), name.as_ptr()) };
    if found.is_null() {
        drop(PyErr::take(py));
        return obj.getattr(name).ok();
    }
    // SAFETY: a new reference, owned from here.
    Some(unsafe { Bound::from_owned_ptr(py, found) })
}
