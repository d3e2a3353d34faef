//! `--modules`' bytes saved for backward, per forward pass and thread: the storages of the
//! tensors autograd saves, as memprof's stand-in for SavedVariable's constructor sees them
//! (src/torch/cpp/saved_interpose.cpp, no hook: it calls `mp_rust_saved_tensor` while the pass
//! counts) or, where it cannot stand in, a saved-tensors hook does (src/python/ext/saved.rs's
//! Python pack hook, or the native one in src/torch/cpp/saved_hooks.cpp), each counted once per
//! pass, on the measured device only, never a parameter's or a buffer's. A root module call
//! begins a pass (`begin`, with the root's state: the objects of its parameters and buffers,
//! which are not activations), each call reads the pass's running total when it starts and ends
//! (`pass_bytes`: a call's saved bytes include its children's), and the root's end ends it
//! (`end_pass`). Whether a saved tensor is state is Python's to say, asked once per storage a
//! pass sees: the Python layer hands its check over (`set_state_check`).
use crate::capture::int_hash::IntSet;
use std::cell::RefCell;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::{Arc, OnceLock};

/// A root module's state as the Python layer found it: the addresses of the Python objects in
/// its modules' `_parameters` and `_buffers`, each with its kind, and the generations of those
/// dicts the objects were read in (src/python/ext/saved_state.rs: while a generation holds, the
/// objects of that kind are the dicts' and alive). Shared by the passes of one root.
#[derive(Default)]
pub struct RootState {
    pub objects: crate::capture::int_hash::IntMap<usize, StateKind>,
    pub generations: [u64; 2],
}

/// Where a state object was found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StateKind {
    Parameter = 0,
    Buffer = 1,
}

struct Pass {
    /// -1: the CPU; else the CUDA device measured.
    device_index: c_int,
    state: Arc<RootState>,
    /// The storages the pass has seen: counted, or found to be state.
    seen: IntSet<usize>,
    bytes: u64,
}

thread_local! {
    static PASS: RefCell<Option<Pass>> = const { RefCell::new(None) };
    /// The set of the thread's previous pass, emptied, for the next: a root call's set grows to
    /// the same size at every call, and growing it anew each time cost a third of what reading
    /// the root's parameters and buffers then cost.
    static SPARE: RefCell<IntSet<usize>> = RefCell::new(IntSet::default());
}

/// An empty set for a pass's storages (the previous pass's, cleared: its capacity kept).
fn spare_set() -> IntSet<usize> {
    SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// Keeps a pass's set for the next pass's `spare_set`.
fn keep_spare(mut set: IntSet<usize>) {
    set.clear();
    SPARE.with(|s| *s.borrow_mut() = set);
}

/// Whether the tensor whose TensorImpl is at the address is state of the pass's root (one of
/// its parameters or buffers, or a view of one) or any parameter (FSDP2's gathered ones are not
/// among the root's objects when its pass starts).
type StateCheck = fn(usize, &RootState) -> bool;
static STATE_CHECK: OnceLock<StateCheck> = OnceLock::new();

/// The Python layer's state check (set once).
pub fn set_state_check(check: StateCheck) {
    let _ = STATE_CHECK.set(check);
}

/// A root module call starts a forward pass on this thread, with the root's `state`;
/// `interposed`: the stand-in for SavedVariable's constructor counts what the pass saves (else a
/// hook does, or nothing).
pub fn begin(device_index: c_int, state: Arc<RootState>, interposed: bool) {
    crate::torch::saved_counting(interposed);
    let seen = spare_set();
    let previous = PASS.with(|p| {
        p.borrow_mut().replace(Pass {
            device_index,
            state,
            seen,
            bytes: 0,
        })
    });
    if let Some(previous) = previous {
        keep_spare(previous.seen);
    }
}

/// The bytes this thread's pass has saved so far.
pub fn pass_bytes() -> u64 {
    PASS.with(|p| p.borrow().as_ref().map_or(0, |p| p.bytes))
}

/// The root call ended: nothing is counted on this thread until the next one.
pub fn end_pass() {
    crate::torch::saved_counting(false);
    if let Some(pass) = PASS.with(|p| p.borrow_mut().take()) {
        keep_spare(pass.seen);
    }
}

/// The measured device of this thread's pass (-1: the CPU, also when no pass runs).
pub fn device_index() -> c_int {
    PASS.with(|p| p.borrow().as_ref().map_or(-1, |p| p.device_index))
}

/// A saved tensor's storage at `ptr` of `nbytes`: counted unless the pass has seen it, or
/// `is_state` (asked only then, with the pass's root state) says it is state; either way seen
/// from then on.
pub fn count(ptr: usize, nbytes: u64, is_state: impl FnOnce(&RootState) -> bool) {
    let state = PASS.with(|p| match p.borrow().as_ref() {
        Some(p) if !p.seen.contains(&ptr) => Some(Arc::clone(&p.state)),
        _ => None,
    });
    // The check runs outside the borrow: it may run Python.
    let Some(state) = state else {
        return;
    };
    let counts = !is_state(&state);
    PASS.with(|p| {
        if let Some(p) = p.borrow_mut().as_mut() {
            if p.seen.insert(ptr) && counts {
                p.bytes += nbytes;
            }
        }
    });
}

/// Autograd saved the tensor whose TensorImpl is at `tensor_impl` on this thread, as the
/// stand-in or the native pack hook saw it. Called from C++ (src/torch/cpp/saved_interpose.cpp,
/// saved_hooks.cpp): never unwinds.
pub extern "C" fn mp_rust_saved_tensor(tensor_impl: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        let impl_ptr = tensor_impl as usize;
        // SAFETY: autograd holds the tensor while it calls the pack hook.
        let Some((ptr, nbytes)) = (unsafe { crate::torch::storage_on(impl_ptr, device_index()) })
        else {
            return;
        };
        count(ptr, nbytes, |state| {
            STATE_CHECK
                .get()
                .is_some_and(|check| check(impl_ptr, state))
        });
    });
}
