//! A root module's state for `--modules`' saved bytes: the Python objects in its modules'
//! `_parameters` and `_buffers` dicts, whose storages a pass does not count (src/python/ext/
//! saved.rs reads them at each root call: `.data` and `.to()` swap storages in place). The
//! objects are found by walking the root's modules and their dicts, and kept for the root's later
//! calls while none of those dicts has changed since: on Python 3.12+ memprof watches them
//! (`PyDict_AddWatcher`: any change, or a dict's end, advances a generation). Where it cannot
//! watch (3.11, or the interpreter's watchers all taken) each root call walks them again.
//!
//! Why: the walk (every module's instance dict looked up for its two dicts, each dict iterated)
//! touched some 1,000 objects at each of ResNet-50's root calls that the step had left cold,
//! before the step's first kernel; a kept list is one array.
use crate::capture::int_hash::IntSet;
use crate::python::c_api::python_function;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple, PyWeakrefReference};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The dict watcher's id (-1: none).
static WATCHER: AtomicI32 = AtomicI32::new(-1);
/// Advanced by every change to a watched dict (and when the watcher goes).
static GENERATION: AtomicU64 = AtomicU64::new(0);

type WatchCallback =
    extern "C" fn(c_int, *mut ffi::PyObject, *mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

/// The dicts watched and not yet deallocated, so that each is unwatched before the watcher goes
/// (a dict keeps its watched mark after `PyDict_ClearWatcher`, and a watcher added later with
/// the same id, the program's, would be told of its changes). Never locked while Python runs:
/// the callback locks it when a watched dict is deallocated.
static WATCHED: Mutex<Option<IntSet<usize>>> = Mutex::new(None);

/// `PyDict_EVENT_DEALLOCATED` (the last of `PyDict_WatchEvent`, 3.12+).
const DICT_DEALLOCATED: c_int = 5;

fn watched() -> std::sync::MutexGuard<'static, Option<IntSet<usize>>> {
    WATCHED.lock().unwrap_or_else(|e| e.into_inner())
}

extern "C" fn on_dict_changed(
    event: c_int,
    dict: *mut ffi::PyObject,
    _key: *mut ffi::PyObject,
    _value: *mut ffi::PyObject,
) -> c_int {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    if event == DICT_DEALLOCATED {
        if let Some(set) = watched().as_mut() {
            set.remove(&(dict as usize));
        }
    }
    0
}

/// A root's objects, by the tuple of weak references to its modules that modules.py passes
/// (made once per root), and the generation they were found in.
struct Kept {
    modules: Py<PyTuple>,
    generation: u64,
    objects: Arc<[usize]>,
}

static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
/// Roots kept at most (a program has one or a few; the oldest goes first).
const KEPT_ROOTS: usize = 8;

fn watching() -> bool {
    WATCHER.load(Ordering::Acquire) >= 0
}

/// Adds the dict watcher, once (the GIL held).
fn watch(py: Python<'_>) {
    if watching() {
        return;
    }
    let Some(found) = python_function(c"PyDict_AddWatcher") else {
        return;
    };
    type AddWatcher = unsafe extern "C" fn(WatchCallback) -> c_int;
    // SAFETY: PyDict_AddWatcher has this signature where it exists (3.12+); the GIL is held.
    let id = unsafe { std::mem::transmute::<*mut c_void, AddWatcher>(found)(on_dict_changed) };
    if id < 0 {
        drop(PyErr::take(py));
    } else {
        WATCHER.store(id, Ordering::Release);
    }
}

/// Takes the watcher off and forgets every root's objects (an in-process session's end: nothing of
/// memprof stays in the program). The GIL held.
pub fn forget(py: Python<'_>) {
    let kept = std::mem::take(&mut *KEPT.lock().unwrap_or_else(|e| e.into_inner()));
    // Dropped here, with the GIL held and the lock not.
    drop(kept);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    let id = WATCHER.swap(-1, Ordering::AcqRel);
    let dicts = watched().take().unwrap_or_default();
    if id < 0 {
        return;
    }
    // PyDict_Unwatch and PyDict_ClearWatcher exist where PyDict_AddWatcher gave `id`.
    if let Some(found) = python_function(c"PyDict_Unwatch") {
        type Unwatch = unsafe extern "C" fn(c_int, *mut ffi::PyObject) -> c_int;
        // SAFETY: its signature; the GIL is held.
        let unwatch = unsafe { std::mem::transmute::<*mut c_void, Unwatch>(found) };
        for dict in dicts {
            // SAFETY: a dict not deallocated since it was watched (the callback forgets those).
            if unsafe { unwatch(id, dict as *mut ffi::PyObject) } < 0 {
                drop(PyErr::take(py));
            }
        }
    }
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

/// A root's objects, alive while this lives: each held by its module's dict (kept objects,
/// whose dicts are unchanged) or by `held` (objects found just now, which Python run since, a
/// module's `__getattr__` say, may have taken out of their dicts).
pub struct RootObjects<'py> {
    pub objects: Arc<[usize]>,
    _held: Vec<Bound<'py, PyAny>>,
}

/// The objects in the parameters and buffers of the root whose modules `modules` (weak
/// references) are: kept from an earlier root call while every dict they were found in is
/// watched and unchanged (so each object is alive, its dict holding it), else found now. The
/// GIL held.
pub fn root_objects<'py>(modules: &Bound<'py, PyTuple>) -> RootObjects<'py> {
    let py = modules.py();
    watch(py);
    let generation = GENERATION.load(Ordering::Acquire);
    if watching() {
        let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        let found = kept.iter().find(|k| k.modules.bind(py).is(modules));
        if let Some(k) = found.filter(|k| k.generation == generation) {
            return RootObjects {
                objects: Arc::clone(&k.objects),
                _held: Vec::new(),
            };
        }
    }
    let (held, all_watched) = find(modules);
    let objects: Arc<[usize]> = held.iter().map(|o| o.as_ptr() as usize).collect();
    // Kept only if no watched dict changed while they were found.
    if watching() && all_watched && GENERATION.load(Ordering::Acquire) == generation {
        let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        let dropped = kept
            .iter()
            .position(|k| k.modules.bind(py).is(modules))
            .or((kept.len() >= KEPT_ROOTS).then_some(0))
            .map(|at| kept.remove(at));
        kept.push(Kept {
            modules: modules.clone().unbind(),
            generation,
            objects: Arc::clone(&objects),
        });
        drop(kept);
        // Dropped with the GIL held and the lock not.
        drop(dropped);
    }
    RootObjects {
        objects,
        _held: held,
    }
}

/// The objects in the `_parameters` and `_buffers` of the modules still alive, each dict
/// watched (where the watcher is on); and whether every dict could be.
fn find<'py>(modules: &Bound<'py, PyTuple>) -> (Vec<Bound<'py, PyAny>>, bool) {
    let py = modules.py();
    let watch = python_function(c"PyDict_Watch").filter(|_| watching());
    type Watch = unsafe extern "C" fn(c_int, *mut ffi::PyObject) -> c_int;
    // SAFETY: PyDict_Watch has this signature where it exists (3.12+).
    let watch = watch.map(|f| unsafe { std::mem::transmute::<*mut c_void, Watch>(f) });
    let id = WATCHER.load(Ordering::Acquire);
    let mut objects = Vec::new();
    let mut all_watched = true;
    let alive = modules.iter().filter_map(|m| {
        m.cast_into::<PyWeakrefReference>()
            .ok()
            .and_then(|r| r.upgrade())
    });
    for module in alive {
        for field in [intern!(py, "_parameters"), intern!(py, "_buffers")] {
            let Some(dict) = instance_attribute(&module, field) else {
                continue;
            };
            let Ok(dict) = dict.cast_into::<PyDict>() else {
                continue;
            };
            if let Some(watch) = watch {
                // SAFETY: a live dict; the GIL is held.
                if unsafe { watch(id, dict.as_ptr()) } < 0 {
                    drop(PyErr::take(py));
                    all_watched = false;
                } else {
                    watched()
                        .get_or_insert_with(IntSet::default)
                        .insert(dict.as_ptr() as usize);
                }
            }
            // A module without a bias holds None in its place.
            objects.extend(
                dict.iter()
                    .filter(|(_, value)| !value.is_none())
                    .map(|(_, value)| value),
            );
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
