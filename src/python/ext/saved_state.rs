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
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The dict watcher's id (-1: none).
static WATCHER: AtomicI32 = AtomicI32::new(-1);
/// The watcher could not be added (no slot free): not asked again until the session ends.
static REFUSED: AtomicBool = AtomicBool::new(false);
/// Advanced by every change to a watched dict.
static GENERATION: AtomicU64 = AtomicU64::new(0);

type WatchCallback =
    extern "C" fn(c_int, *mut ffi::PyObject, *mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

type AddWatcher = unsafe extern "C" fn(WatchCallback) -> c_int;
type ClearWatcher = unsafe extern "C" fn(c_int) -> c_int;
/// PyDict_Watch and PyDict_Unwatch.
type WatchDict = unsafe extern "C" fn(c_int, *mut ffi::PyObject) -> c_int;

/// The dict-watcher functions of this process's Python (3.12+).
struct DictWatchers {
    add: AddWatcher,
    clear: ClearWatcher,
    watch: WatchDict,
    unwatch: WatchDict,
}

/// Looked up once per process (None: this Python has none, as 3.11), not at every root call:
/// a symbol that no library has costs a search of every library loaded.
fn dict_watchers() -> Option<&'static DictWatchers> {
    static FOUND: OnceLock<Option<DictWatchers>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let add = python_function(c"PyDict_AddWatcher")?;
            let clear = python_function(c"PyDict_ClearWatcher")?;
            let watch = python_function(c"PyDict_Watch")?;
            let unwatch = python_function(c"PyDict_Unwatch")?;
            // SAFETY: these are the signatures of CPython's functions of these names, which
            // exist together (3.12+).
            unsafe {
                Some(DictWatchers {
                    add: std::mem::transmute::<*mut c_void, AddWatcher>(add),
                    clear: std::mem::transmute::<*mut c_void, ClearWatcher>(clear),
                    watch: std::mem::transmute::<*mut c_void, WatchDict>(watch),
                    unwatch: std::mem::transmute::<*mut c_void, WatchDict>(unwatch),
                })
            }
        })
        .as_ref()
}

/// The dicts watched and not yet deallocated, so that each is unwatched before the watcher goes
/// (a dict keeps its watched mark after `PyDict_ClearWatcher`, and a watcher added later with
/// the same id, the program's, would be told of its changes). Never locked while Python runs:
/// the callback locks it when a watched dict is deallocated.
static WATCHED: Mutex<Option<IntSet<usize>>> = Mutex::new(None);

/// `PyDict_EVENT_DEALLOCATED` (the last of `PyDict_WatchEvent`, 3.12+).
const DICT_DEALLOCATED: c_int = 5;

fn watched() -> MutexGuard<'static, Option<IntSet<usize>>> {
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

fn kept() -> MutexGuard<'static, Vec<Kept>> {
    KEPT.lock().unwrap_or_else(|e| e.into_inner())
}

fn watching() -> bool {
    WATCHER.load(Ordering::Acquire) >= 0
}

/// Adds the dict watcher, once a session (the GIL held).
fn watch(py: Python<'_>) {
    if watching() || REFUSED.load(Ordering::Acquire) {
        return;
    }
    let Some(api) = dict_watchers() else {
        return;
    };
    // SAFETY: CPython's PyDict_AddWatcher; the GIL is held.
    let id = unsafe { (api.add)(on_dict_changed) };
    if id < 0 {
        drop(PyErr::take(py));
        REFUSED.store(true, Ordering::Release);
    } else {
        WATCHER.store(id, Ordering::Release);
    }
}

/// Takes the watcher off and forgets every root's objects (an in-process session's end: nothing of
/// memprof stays in the program). The GIL held.
pub fn forget(py: Python<'_>) {
    let kept = std::mem::take(&mut *kept());
    // Dropped here, with the GIL held and the lock not.
    drop(kept);
    REFUSED.store(false, Ordering::Release);
    let id = WATCHER.swap(-1, Ordering::AcqRel);
    let dicts = watched().take().unwrap_or_default();
    // A watcher's id came from these functions.
    let Some(api) = dict_watchers().filter(|_| id >= 0) else {
        return;
    };
    for dict in dicts {
        // SAFETY: CPython's PyDict_Unwatch, the GIL held, on a dict not deallocated since it was
        // watched (the callback forgets those).
        if unsafe { (api.unwatch)(id, dict as *mut ffi::PyObject) } < 0 {
            drop(PyErr::take(py));
        }
    }
    // SAFETY: CPython's PyDict_ClearWatcher; the GIL is held.
    if unsafe { (api.clear)(id) } < 0 {
        drop(PyErr::take(py));
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
        let kept = kept();
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
        let mut kept = kept();
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
    let watch = dict_watchers().filter(|_| watching()).map(|api| api.watch);
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
                // SAFETY: CPython's PyDict_Watch, on a live dict; the GIL is held.
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
