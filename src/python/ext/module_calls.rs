//! `--modules`' per-call bookkeeping, native. memprof's wrapper of torch's `Module._call_impl`
//! (modules.py) calls `module_enter` and `module_exit` for every forward call; these keep each
//! thread's stack of running calls, open and close the calls' measurement scopes, take what each
//! saved for backward (saved.rs), hook their tensors' autograd nodes for backward
//! (src/capture/backward.rs), and add the readings to the entries and the timeline that the
//! report is built from. Python is asked only for what needs it, by what the hooks return: a
//! root call (the schedule, the saved-tensors hooks), a module seen for the first time under its
//! root (its name), and with --history or a schedule of root calls the per-call follow-ups (the
//! allocator's context, Python tensor hooks). No Python object is made per call on the common
//! path.
//!
//! Shared state is behind one lock, never held while Python code runs (any bytecode can switch
//! threads, and the other thread would wait for the lock holding the GIL). Lock order: this
//! state, then src/capture/backward.rs's, then the windows' (src/capture/module_windows.rs).
use super::impl_list::ImplList;
use crate::capture::int_hash::IntMap;
use crate::capture::module_windows::ScopeReading;
use crate::capture::{module_windows, recorder};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple, PyType, PyWeakrefReference};
use std::cell::RefCell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Timeline items kept in the report; later calls are counted as dropped.
const TIMELINE_CAP: usize = 20000;

/// What a hook asks Python to do (the first item of what it returns; None: nothing).
/// No call runs on this thread: the tracker decides about a root call.
const ROOT: u8 = 1;
/// The module has no site under this root yet: the tracker names it (the parent's entry follows).
const SITE: u8 = 2;
/// The call was entered or exited; the tracker follows up (--history, Python tensor hooks).
const FOLLOW_UP: u8 = 3;
/// The root call ended (the tracker pops its saved-tensors hooks).
const ROOT_ENDED: u8 = 4;
/// torch is compiling (`torch.compiler.is_compiling()`): the call runs unmeasured.
const PASS: u8 = 5;

/// One running forward call.
struct Call {
    /// Its measurement scope's id, which is also its token for backward.
    token: u64,
    entry: u32,
    module: usize,
    /// The pass's saved bytes when the call started.
    saved_from: u64,
    /// Its inputs hooked for its backward (by the C++ hooks).
    inputs: u32,
    input_bytes: u64,
    children: u32,
    /// Its place in the pass's calls, and in the timeline.
    index: usize,
    slot: Option<usize>,
}

/// A finished call, as checkpoint suggestions read a pass.
#[derive(Clone, Copy)]
struct PassCall {
    entry: u32,
    saved: u64,
    input_bytes: u64,
    children: u32,
}

/// One forward pass of a root module on this thread.
struct Pass {
    /// The root whose names the pass's modules take (a recomputed submodule's pass keeps its
    /// root's), and whether the pass is that root's own call.
    root: usize,
    own_root: bool,
    /// -1: the CPU; else the CUDA device measured.
    device_index: c_int,
    calls: Vec<Option<PassCall>>,
}

struct ThreadCalls {
    stack: Vec<Call>,
    /// Module calls inside a root call the schedule skips (ids, innermost last).
    skip: Vec<usize>,
    pass: Option<Pass>,
    /// The last pass's list of calls, emptied: the next pass's, so that no step grows (copies)
    /// or allocates one anew (a large allocation each step made glibc consolidate its free lists).
    spare_calls: Vec<Option<PassCall>>,
}

thread_local! {
    // Made as a constant, so that each use is a read of the thread's slot, not a check whether
    // it was made yet (every module call used it three times).
    static THREAD: RefCell<ThreadCalls> = const {
        RefCell::new(ThreadCalls {
            stack: Vec::new(),
            skip: Vec::new(),
            pass: None,
            spare_calls: Vec::new(),
        })
    };
}

/// The tracker's settings (modules_configure), read on every call without the lock: the
/// backward is measured by C++ hooks (else Python tensor hooks, which need follow-ups), and
/// checkpoint suggestions need each call's input bytes.
static NATIVE: AtomicBool = AtomicBool::new(false);
static PLAN: AtomicBool = AtomicBool::new(false);

/// `torch.compiler`'s namespace, whose `_is_compiling_flag` is what `is_compiling()` answers
/// outside TorchScript (set by non-strict export while it runs modules on fake tensors): read
/// here, where the wrapper asked it of two Python frames at every call.
static COMPILER: OnceLock<Py<PyDict>> = OnceLock::new();

/// dynamo's `get_eval_frame_callback` (torch._C), where memprof stands in for torch's
/// `Module.__call__` (modules.py, _stand_in): a frame of torch's file, which dynamo runs as it
/// is when the callback is set rather than compile it, as it compiled the wrapper of
/// `_call_impl` (whose `_enter` answered PASS in the graph). Kept as its C function and `self`
/// where it is a C function without arguments (it is: a thread-specific read), which
/// `compiling()` calls directly: through Python's call machinery, the object's call cost about
/// 100 instructions a module call.
enum CallbackGetter {
    Direct(ffi::PyCFunction, usize),
    Object(Py<PyAny>),
}

static DYNAMO_CALLBACK: OnceLock<CallbackGetter> = OnceLock::new();

fn compiling(py: Python<'_>) -> bool {
    COMPILER.get().is_some_and(|namespace| {
        // SAFETY: a borrowed read of a live dict with an interned key; the GIL is held.
        let flag = unsafe {
            ffi::PyDict_GetItemWithError(
                namespace.as_ptr(),
                pyo3::intern!(py, "_is_compiling_flag").as_ptr(),
            )
        };
        if flag.is_null() {
            // SAFETY: the GIL is held; a lookup error is not the program's.
            unsafe { ffi::PyErr_Clear() };
            return false;
        }
        // SAFETY: `flag` is a borrowed reference the dict holds.
        flag != unsafe { ffi::Py_False() }
            && unsafe { Bound::from_borrowed_ptr(py, flag) }
                .is_truthy()
                .unwrap_or(false)
    }) || DYNAMO_CALLBACK.get().is_some_and(|get| {
        // Set while a compiled function runs (and its frames would be compiled), None else.
        match get {
            CallbackGetter::Direct(function, slf) => {
                // SAFETY: a METH_NOARGS C function called as CPython calls it (its `self`, no
                // argument), with the GIL held; it returns a new reference or NULL.
                let callback =
                    unsafe { function(*slf as *mut ffi::PyObject, std::ptr::null_mut()) };
                if callback.is_null() {
                    unsafe { ffi::PyErr_Clear() };
                    return false;
                }
                // SAFETY: the new reference is let go here.
                let set = callback != unsafe { ffi::Py_None() };
                unsafe { ffi::Py_DECREF(callback) };
                set
            }
            CallbackGetter::Object(get) => get
                .bind(py)
                .call0()
                .is_ok_and(|callback| !callback.is_none()),
        }
    })
}

/// memprof stands in for torch's `Module.__call__`: a module call made while dynamo's callback
/// (`get_eval_frame_callback()`) is set runs as torch's, unmeasured, as inside a graph.
#[pyfunction]
fn modules_under_dynamo(get_eval_frame_callback: Bound<'_, PyAny>) {
    let ptr = get_eval_frame_callback.as_ptr();
    // SAFETY: type checks and reads of a live object's fields through CPython's API, the GIL
    // held. A C function's `self` (dynamo's module) lives as long as the function, which the
    // getter keeps.
    let direct = unsafe {
        (ffi::PyCFunction_Check(ptr) != 0
            && ffi::PyCFunction_GetFlags(ptr) & !ffi::METH_COEXIST == ffi::METH_NOARGS)
            .then(|| ffi::PyCFunction_GetFunction(ptr))
            .flatten()
            .map(|function| (function, ffi::PyCFunction_GetSelf(ptr) as usize))
    };
    let getter = match direct {
        Some((function, slf)) => {
            // The function object holds its `self`; kept alive with it.
            std::mem::forget(get_eval_frame_callback);
            CallbackGetter::Direct(function, slf)
        }
        None => CallbackGetter::Object(get_eval_frame_callback.unbind()),
    };
    let _ = DYNAMO_CALLBACK.set(getter);
}

/// A module under a root, found once: its forward entry.
struct Site {
    root: Py<PyWeakrefReference>,
    module: Py<PyWeakrefReference>,
    entry: u32,
}

/// The aggregate of one (root, module, phase): what the report's entry counts.
#[derive(Default)]
struct Entry {
    /// For a backward entry, its forward entry; for a forward one, its backward (once seen).
    backward_of: Option<u32>,
    backward: Option<u32>,
    calls: u64,
    delta: i64,
    peak: Option<i64>,
    peak_increase: Option<i64>,
    saved: Option<u64>,
    /// Bytes per kind of collective (`torch::collectives::KINDS`), once any was seen.
    collectives: Vec<Option<i64>>,
}

/// A timeline item: the entry, and once the call ended its reading and saved bytes.
struct Slot {
    entry: u32,
    reading: Option<ScopeReading>,
    saved: Option<u64>,
}

#[derive(Default)]
struct Tracker {
    sites: IntMap<(usize, usize), Site>,
    /// Sites alive at the last sweep of dead ones.
    sites_live: usize,
    entries: Vec<Entry>,
    timeline: Vec<Slot>,
    dropped: u64,
    /// The root pass that saved the most, which checkpoint suggestions plan on: its root
    /// call's entry, what it saved, and its calls.
    best: Option<(u32, u64, Vec<PassCall>)>,
    /// The backwards taken from src/capture/backward.rs, and the order they started in (scope
    /// id, index), empty between takes.
    finished: Vec<crate::capture::backward::Finished>,
    finished_order: Vec<(u64, u32)>,
}

static TRACKER: Mutex<Option<Tracker>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<Tracker>> {
    TRACKER.lock().unwrap_or_else(|e| e.into_inner())
}

fn with_tracker<T>(f: impl FnOnce(&mut Tracker) -> T) -> T {
    f(lock().get_or_insert_with(|| Tracker::fresh(None)))
}

impl Tracker {
    /// A tracker with nothing measured, its timeline's room made for every item it keeps (the
    /// previous tracker's, emptied, where there is one: an in-process session's follows
    /// another's). Grown item by item, the timeline was copied into a larger room a dozen times
    /// in the first steps of each session, and its large allocations made glibc consolidate its
    /// free lists (`benches/module_call_instructions.sh`: 6,273 instructions a module call while
    /// it grew, 5,874 with its room made once).
    fn fresh(previous: Option<Tracker>) -> Tracker {
        let mut timeline = previous.map(|t| t.timeline).unwrap_or_default();
        timeline.clear();
        timeline.reserve_exact(TIMELINE_CAP);
        Tracker {
            timeline,
            ..Tracker::default()
        }
    }

    fn slot(&mut self, entry: u32) -> Option<usize> {
        if self.timeline.len() >= TIMELINE_CAP {
            self.dropped += 1;
            return None;
        }
        self.timeline.push(Slot {
            entry,
            reading: None,
            saved: None,
        });
        Some(self.timeline.len() - 1)
    }

    fn record(&mut self, entry: u32, reading: &ScopeReading, saved: Option<u64>) {
        let e = &mut self.entries[entry as usize];
        if let Some(bytes) = &reading.collectives {
            let kinds = crate::torch::collectives::KINDS.len();
            e.collectives.resize(kinds, None);
            for (sum, &n) in e.collectives.iter_mut().zip(bytes.iter().take(kinds)) {
                if n != 0 {
                    *sum = Some(sum.unwrap_or(0) + n);
                }
            }
        }
        e.calls += 1;
        e.delta += reading.end - reading.start;
        e.peak = Some(e.peak.map_or(reading.peak, |p| p.max(reading.peak)));
        let increase = reading.peak - reading.start;
        e.peak_increase = Some(e.peak_increase.map_or(increase, |p| p.max(increase)));
        if let (Some(total), Some(s)) = (e.saved.as_mut(), saved) {
            *total += s;
        }
    }

    /// The forward entry's backward entry, made at its first backward.
    fn backward_entry(&mut self, forward: u32) -> u32 {
        if let Some(b) = self.entries[forward as usize].backward {
            return b;
        }
        let b = self.entries.len() as u32;
        self.entries.push(Entry {
            backward_of: Some(forward),
            ..Entry::default()
        });
        self.entries[forward as usize].backward = Some(b);
        b
    }

    /// Records the backwards that ended, in the order they started (through `finished`, which
    /// keeps its capacity: a step's backwards are taken at the next root call).
    fn collect_backwards(&mut self, end_all: bool) {
        if end_all {
            crate::capture::backward::end_all();
        }
        let mut finished = std::mem::take(&mut self.finished);
        crate::capture::backward::take_finished(&mut finished);
        // The order they started in is sorted by its keys alone (scope ids, unique), not the
        // 64-byte readings, whose moves (calls of memcpy) were a visible part of a module call.
        let mut order = std::mem::take(&mut self.finished_order);
        order.extend(finished.iter().enumerate().map(|(i, f)| (f.1, i as u32)));
        order.sort_unstable();
        for &(_, i) in order.iter() {
            let (forward, _, reading) = &mut finished[i as usize];
            let reading = std::mem::take(reading);
            let entry = self.backward_entry(*forward);
            self.record(entry, &reading, None);
            if let Some(slot) = self.slot(entry) {
                self.timeline[slot].reading = Some(reading);
            }
        }
        order.clear();
        finished.clear();
        self.finished = finished;
        self.finished_order = order;
    }

    /// The module's forward entry under `root`, if its site is known and both are alive.
    fn site(&self, root: usize, module: &Bound<'_, PyAny>) -> Option<u32> {
        let site = self.sites.get(&(root, module.as_ptr() as usize))?;
        // Read from the weak reference's referent field, as `PyWeakref_GetRef` reads it, without
        // making (and dropping) a reference to the object: the field is the object while it lives
        // and None once it died, so an object alive at `ptr` is the one referred to. (Every call
        // did it twice, and wrote to both objects' reference counts.)
        let alive = |r: &Py<PyWeakrefReference>, ptr: usize| {
            // SAFETY: `r` is a live weak reference object (the site holds it), a
            // `PyWeakReference` on every Python memprof builds for (CPython, with the GIL).
            unsafe { (*r.as_ptr().cast::<pyo3::ffi::PyWeakReference>()).wr_object as usize == ptr }
        };
        (alive(&site.module, module.as_ptr() as usize) && alive(&site.root, root))
            .then_some(site.entry)
    }

    fn add_site(
        &mut self,
        py: Python<'_>,
        root: &Bound<'_, PyAny>,
        module: &Bound<'_, PyAny>,
        entry: u32,
    ) -> PyResult<()> {
        if self.sites.len() > 2 * self.sites_live + 1024 {
            // Modules built and dropped over and over: forget the dead.
            self.sites
                .retain(|_, s| s.module.bind(py).upgrade().is_some());
            self.sites_live = self.sites.len();
        }
        let site = Site {
            root: PyWeakrefReference::new(root)?.unbind(),
            module: PyWeakrefReference::new(module)?.unbind(),
            entry,
        };
        self.sites
            .insert((root.as_ptr() as usize, module.as_ptr() as usize), site);
        Ok(())
    }
}

/// Whether autograd records on this thread now (torch.is_grad_enabled()).
fn grad_enabled() -> bool {
    // SAFETY: reads a thread-local flag of libtorch.
    unsafe { crate::torch::grad_enabled() }
}

/// Adds the TensorImpl addresses (`_cdata`) of the tensors among `values` to `out`.
fn tensor_impls(values: &Bound<'_, PyTuple>, out: &mut ImplList) {
    let Some(tensor) = super::tensor_object::tensor_type(values.py()) else {
        return;
    };
    values
        .iter()
        .filter(|v| v.is_instance(tensor).unwrap_or(false))
        .filter_map(|v| super::saved::tensor_impl(&v).ok())
        .for_each(|t| out.push(t));
}

/// Calls `f` with the TensorImpl address of each tensor in a module's output: the output
/// itself, or inside lists, tuples and dicts (to a depth of 3), as the Python tracker read them.
fn for_each_output(
    value: &Bound<'_, PyAny>,
    tensor: &Bound<'_, PyType>,
    depth: u32,
    f: &mut impl FnMut(usize),
) {
    if value.is_instance(tensor).unwrap_or(false) {
        if let Ok(t) = super::saved::tensor_impl(value) {
            f(t);
        }
        return;
    }
    if depth > 3 {
        return;
    }
    if let Ok(list) = value.cast::<PyList>() {
        for v in list.iter() {
            for_each_output(&v, tensor, depth + 1, f);
        }
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        for v in tuple.iter() {
            for_each_output(&v, tensor, depth + 1, f);
        }
    } else if let Ok(dict) = value.cast::<PyDict>() {
        for (_, v) in dict.iter() {
            for_each_output(&v, tensor, depth + 1, f);
        }
    }
}

/// The bytes of the distinct storages of `impls` on the measured device.
fn input_bytes(impls: &[usize], device_index: c_int) -> u64 {
    let mut seen = Vec::new();
    let mut total = 0;
    for &t in impls {
        // SAFETY: each address is the TensorImpl of a tensor the caller's arguments hold.
        if let Some((ptr, nbytes)) = unsafe { crate::torch::storage_on(t, device_index) } {
            if !seen.contains(&ptr) {
                seen.push(ptr);
                total += nbytes;
            }
        }
    }
    total
}

/// What `module_enter` and its variants return: (what to do, token, entry).
type Entered = Option<(u8, u64, i64)>;

/// Starts a call of the module whose entry is known, its timeline item `slot` already taken;
/// `scope` is opened here unless given.
fn enter(
    module: &Bound<'_, PyAny>,
    args: &Bound<'_, PyTuple>,
    entry: u32,
    slot: Option<usize>,
    scope: Option<u64>,
) -> Entered {
    let (native, plan) = (NATIVE.load(Ordering::Relaxed), PLAN.load(Ordering::Relaxed));
    let grad = grad_enabled();
    // Python is read first, with no lock held.
    let mut impls = ImplList::new();
    if (grad && native) || plan {
        tensor_impls(args, &mut impls);
    }
    let token = scope.unwrap_or_else(module_windows::open);
    let saved_from = crate::capture::saved::pass_bytes();
    let inputs = if grad && native {
        crate::capture::backward::hook(impls.as_slice(), token, None)
    } else {
        0
    };
    THREAD.with(|th| {
        let mut th = th.borrow_mut();
        let th = &mut *th;
        let Some(pass) = th.pass.as_mut() else {
            return;
        };
        if let Some(parent) = th.stack.last_mut() {
            parent.children += 1;
        }
        let input_bytes = if plan {
            input_bytes(impls.as_slice(), pass.device_index)
        } else {
            0
        };
        pass.calls.push(None);
        crate::capture::peak::set_thread_module(Some(entry));
        th.stack.push(Call {
            token,
            entry,
            module: module.as_ptr() as usize,
            saved_from,
            inputs,
            input_bytes,
            children: 0,
            index: pass.calls.len() - 1,
            slot,
        });
    });
    (!native).then_some((FOLLOW_UP, token, i64::from(entry)))
}

/// A module's forward starts (the `_call_impl` wrapper, at every call). PASS while torch is
/// compiling; dynamo, which cannot trace this, is told that it answers PASS (modules.py).
/// Python calls it through module_calls_fast.rs.
pub(super) fn module_enter(module: &Bound<'_, PyAny>, args: &Bound<'_, PyTuple>) -> Entered {
    let py = module.py();
    if compiling(py) {
        return Some((PASS, 0, -1));
    }
    let id = module.as_ptr() as usize;
    let state = THREAD.with(|th| {
        let mut th = th.borrow_mut();
        if !th.skip.is_empty() {
            th.skip.push(id);
            return Err(None);
        }
        match (th.stack.last(), th.pass.as_ref()) {
            (Some(parent), Some(pass)) => Ok((pass.root, parent.entry)),
            _ => Err(Some((ROOT, 0, -1))),
        }
    });
    let (root, parent) = match state {
        Ok(s) => s,
        Err(answer) => return answer,
    };
    // The site and the call's timeline item under one lock.
    match with_tracker(|t| t.site(root, module).map(|entry| (entry, t.slot(entry)))) {
        Some((entry, slot)) => enter(module, args, entry, slot, None),
        None => Some((SITE, 0, i64::from(parent))),
    }
}

/// A new site's call starts: `entry` is its forward entry, kept for the module under the pass's
/// root when `keep` (not for a module built on the fly, which is named by its caller each call).
#[pyfunction]
fn module_enter_site(
    root: &Bound<'_, PyAny>,
    module: &Bound<'_, PyAny>,
    args: &Bound<'_, PyTuple>,
    entry: u32,
    keep: bool,
) -> PyResult<Entered> {
    let slot = with_tracker(|t| -> PyResult<Option<usize>> {
        if keep {
            t.add_site(module.py(), root, module, entry)?;
        }
        Ok(t.slot(entry))
    })?;
    Ok(enter(module, args, entry, slot, None))
}

/// A measured root call starts a pass on this thread, its scope already open (`token`): the
/// module's names are `root`'s; `device_index` is the device measured (None: the CPU).
#[pyfunction]
#[pyo3(signature = (root, module, args, token, entry, keep, device_index=None))]
fn module_enter_root(
    root: &Bound<'_, PyAny>,
    module: &Bound<'_, PyAny>,
    args: &Bound<'_, PyTuple>,
    token: u64,
    entry: u32,
    keep: bool,
    device_index: Option<c_int>,
) -> PyResult<Entered> {
    let slot = with_tracker(|t| -> PyResult<Option<usize>> {
        t.collect_backwards(false);
        if keep {
            t.add_site(module.py(), root, module, entry)?;
        }
        Ok(t.slot(entry))
    })?;
    THREAD.with(|th| {
        let mut th = th.borrow_mut();
        let calls = std::mem::take(&mut th.spare_calls);
        th.pass = Some(Pass {
            root: root.as_ptr() as usize,
            own_root: root.is(module),
            device_index: device_index.unwrap_or(-1),
            calls,
        })
    });
    Ok(enter(module, args, entry, slot, Some(token)))
}

/// A root call that the schedule skips: module calls inside it are not measured.
#[pyfunction]
fn module_skip(module: &Bound<'_, PyAny>) {
    THREAD.with(|th| th.borrow_mut().skip.push(module.as_ptr() as usize));
}

/// What `module_exit` returns: (what to do, token, the call's entry, the parent's entry or -1,
/// whether an output was hooked for backward).
type Exited = Option<(u8, u64, i64, i64, bool)>;

/// A module's forward ends (the `_call_impl` wrapper, after the compile check; `output` is None
/// when an exception leaves it). Python calls it through module_calls_fast.rs.
pub(super) fn module_exit(module: &Bound<'_, PyAny>, output: &Bound<'_, PyAny>) -> Exited {
    let id = module.as_ptr() as usize;
    let native = NATIVE.load(Ordering::Relaxed);
    // Pop this module's call (and any whose post-hook an exception skipped), each ended here.
    let (token, entry, inputs, parent, root) = THREAD.with(|th| {
        let mut th = th.borrow_mut();
        let th = &mut *th;
        if !th.skip.is_empty() {
            // The top is this module's, unless an exception skipped inner post-hooks.
            while th.skip.pop().is_some_and(|top| top != id) {}
            return None;
        }
        if !th.stack.iter().any(|c| c.module == id) {
            return None;
        }
        let mut last = None;
        while let Some(call) = th.stack.pop() {
            let saved = end_call(&call, th.pass.as_mut());
            let done = call.module == id;
            last = Some((call.token, call.entry, call.inputs, saved));
            if done {
                break;
            }
        }
        let (token, entry, inputs, saved) = last?;
        crate::capture::peak::set_thread_module(th.stack.last().map(|c| c.entry));
        let parent = th.stack.last().map_or(-1, |c| i64::from(c.entry));
        // The root call ended: its pass, and whether it was the root's own call.
        let root = if th.stack.is_empty() {
            th.pass
                .take()
                .map(|p| (p.own_root && p.root == id, saved, p.calls))
        } else {
            None
        };
        Some((token, entry, inputs, parent, root))
    })?;
    // Its outputs' nodes are hooked for its backward (Python is read here, with no lock held).
    let mut hooked = false;
    if native && !output.is_none() && grad_enabled() {
        if let Some(tensor) = super::tensor_object::tensor_type(output.py()) {
            let mut impls = ImplList::new();
            for_each_output(output, tensor, 0, &mut |t| impls.push(t));
            hooked =
                crate::capture::backward::hook(impls.as_slice(), token, Some((entry, inputs))) > 0;
        }
    }
    let entry_id = i64::from(entry);
    let Some((own_root, saved, mut calls)) = root else {
        return (!native).then_some((FOLLOW_UP, token, entry_id, parent, hooked));
    };
    crate::capture::saved::end_pass();
    with_tracker(|t| {
        // The pass that saved the most is the one checkpoint suggestions are planned on.
        if own_root && t.best.as_ref().is_none_or(|b| saved > b.1) {
            t.best = Some((entry, saved, calls.iter().flatten().copied().collect()));
        }
    });
    calls.clear();
    THREAD.with(|th| th.borrow_mut().spare_calls = calls);
    Some((ROOT_ENDED, token, entry_id, parent, hooked))
}

/// Ends a popped call: closes its scope, records its reading and what it saved (returned) in
/// its entry, its timeline slot and its pass.
fn end_call(call: &Call, pass: Option<&mut Pass>) -> u64 {
    let reading = module_windows::close(call.token);
    let saved = crate::capture::saved::pass_bytes().saturating_sub(call.saved_from);
    if let Some(c) = pass.and_then(|p| p.calls.get_mut(call.index)) {
        *c = Some(PassCall {
            entry: call.entry,
            saved,
            input_bytes: call.input_bytes,
            children: call.children,
        });
    }
    with_tracker(|t| {
        if let Some(reading) = &reading {
            t.record(call.entry, reading, Some(saved));
        }
        if let Some(slot) = call.slot {
            t.timeline[slot].saved = Some(saved);
            t.timeline[slot].reading = reading;
        }
    });
    saved
}

/// The tracker's settings, once torch is loaded: torch.Tensor, `torch.compiler`'s namespace,
/// whether the backward is measured by C++ hooks, and whether checkpoint suggestions need each
/// call's input bytes.
#[pyfunction]
fn modules_configure(
    tensor_type: Bound<'_, PyType>,
    compiler: Bound<'_, PyDict>,
    native: bool,
    plan: bool,
) {
    super::tensor_object::set_tensor_type(tensor_type);
    // One torch per process: the first namespace is every later session's too.
    let _ = COMPILER.set(compiler.unbind());
    let (device, collectives) = recorder::with(|r| {
        (
            r.sampler().device().is_some(),
            r.sampler().counts_collectives(),
        )
    })
    .unwrap_or_default();
    module_windows::configure(device, collectives);
    // A fresh tracker: the module tracker that configures it is a new one (each in-process
    // session has its own), and its entries are numbered from 0.
    let mut tracker = lock();
    *tracker = Some(Tracker::fresh(tracker.take()));
    drop(tracker);
    NATIVE.store(native, Ordering::Relaxed);
    PLAN.store(plan, Ordering::Relaxed);
}

/// A root call's window opens (its token): the recorder first follows the program to the CUDA
/// device it uses now.
#[pyfunction]
fn module_root_window() -> u64 {
    recorder::with(|r| r.choose_device());
    module_windows::open()
}

/// A new forward entry; returns its id.
#[pyfunction]
fn modules_entry() -> u32 {
    with_tracker(|t| {
        t.entries.push(Entry {
            saved: Some(0),
            ..Entry::default()
        });
        (t.entries.len() - 1) as u32
    })
}

/// With Python tensor hooks: a call's output (its backward starts with its gradient) or one of
/// its inputs (its backward waits for its gradient) was hooked.
#[pyfunction]
fn modules_hooked(token: u64, entry: u32, output: bool) {
    crate::capture::backward::register(token, entry, output);
}

/// With Python tensor hooks: a gradient arrived for call `token` (see src/capture/backward.rs's kinds).
/// Returns (queue the end-of-pass callback, a backward started, one ended).
#[pyfunction]
fn modules_grad_event(token: u64, kind: c_int) -> (bool, bool, bool) {
    let o = crate::capture::backward::event(token, kind);
    (o.queue, o.opened, o.closed)
}

/// The forward entry of call `token`, if it was hooked for backward.
#[pyfunction]
fn modules_entry_of(token: u64) -> Option<u32> {
    crate::capture::backward::entry_of(token)
}

/// The module calls running now: the forward entries of this thread's calls (outermost first)
/// and those of the calls whose backward runs.
#[pyfunction]
fn modules_running() -> (Vec<u32>, Vec<u32>) {
    let forward = THREAD.with(|th| th.borrow().stack.iter().map(|c| c.entry).collect());
    let running = with_tracker(|t| {
        t.collect_backwards(false);
        crate::capture::backward::running()
    });
    (forward, running)
}

type EntryData = (
    Option<u32>,
    u64,
    i64,
    Option<i64>,
    Option<i64>,
    Option<u64>,
    Vec<(&'static str, i64)>,
);
type SlotData = (u32, Option<(i64, i64, i64)>, Option<u64>);
type ChainData = Option<(u32, Vec<(u32, u64, u64, u32)>)>;

/// Everything measured, for the report (every backward still open ends now): the entries by id
/// (whose forward entry a backward one is, calls, delta, peak, peak increase, saved bytes,
/// collectives), the timeline, the items it dropped, and the chain of the pass that saved most.
#[pyfunction]
fn modules_data() -> (Vec<EntryData>, Vec<SlotData>, u64, ChainData) {
    with_tracker(|t| {
        t.collect_backwards(true);
        let entries = t
            .entries
            .iter()
            .map(|e| {
                let collectives = crate::torch::collectives::KINDS
                    .iter()
                    .zip(&e.collectives)
                    .filter_map(|(k, v)| v.map(|v| (*k, v)))
                    .collect();
                (
                    e.backward_of,
                    e.calls,
                    e.delta,
                    e.peak,
                    e.peak_increase,
                    e.saved,
                    collectives,
                )
            })
            .collect();
        let timeline = t
            .timeline
            .iter()
            .map(|s| {
                (
                    s.entry,
                    s.reading.as_ref().map(|r| (r.start, r.end, r.peak)),
                    s.saved,
                )
            })
            .collect();
        let chain = t.best.as_ref().map(|(root, _, calls)| {
            let calls = calls
                .iter()
                .map(|c| (c.entry, c.saved, c.input_bytes, c.children))
                .collect();
            (*root, calls)
        });
        (entries, timeline, t.dropped, chain)
    })
}

pub fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(module_enter_site, m)?)?;
    m.add_function(wrap_pyfunction!(module_enter_root, m)?)?;
    m.add_function(wrap_pyfunction!(module_skip, m)?)?;
    m.add_function(wrap_pyfunction!(modules_configure, m)?)?;
    m.add_function(wrap_pyfunction!(modules_under_dynamo, m)?)?;
    m.add_function(wrap_pyfunction!(modules_entry, m)?)?;
    m.add_function(wrap_pyfunction!(module_root_window, m)?)?;
    m.add_function(wrap_pyfunction!(modules_hooked, m)?)?;
    m.add_function(wrap_pyfunction!(modules_grad_event, m)?)?;
    m.add_function(wrap_pyfunction!(modules_entry_of, m)?)?;
    m.add_function(wrap_pyfunction!(modules_running, m)?)?;
    m.add_function(wrap_pyfunction!(modules_data, m)?)?;
    Ok(())
}
