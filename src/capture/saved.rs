//! `--modules`' bytes saved for backward, per forward pass and thread: the storages of the
//! tensors autograd saves, as memprof's stand-in for SavedVariable's constructor sees them
//! (src/torch/cpp/saved_interpose.cpp, no hook: it calls `mp_rust_saved_tensor` while the pass
//! counts) or, where it cannot stand in, a saved-tensors hook does (src/python/ext/saved.rs's
//! Python pack hook, or the native one in src/torch/cpp/saved_hooks.cpp), each counted once per
//! pass, on the measured device only, never a parameter's. A root module call begins a pass
//! (`begin`, with the storages of the root's parameters and buffers, which are not
//! activations), each call reads the pass's running total when it starts and ends
//! (`pass_bytes`: a call's saved bytes include its children's), and the root's end ends it
//! (`end_pass`). Whether a tensor is an `nn.Parameter` is Python's to say: the Python layer
//! hands its check over (`set_parameter_check`).
use crate::capture::int_hash::IntSet;
use std::cell::RefCell;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::OnceLock;

struct Pass {
    /// -1: the CPU; else the CUDA device measured.
    device_index: c_int,
    /// The root's parameters and buffers, and what the pass has counted already.
    skip: IntSet<usize>,
    bytes: u64,
}

thread_local! {
    static PASS: RefCell<Option<Pass>> = const { RefCell::new(None) };
    /// The set of the thread's previous pass, emptied, for the next: a root call's set grows to
    /// the same size at every call, and growing it anew cost a third of reading the root's
    /// parameters and buffers.
    static SPARE: RefCell<IntSet<usize>> = RefCell::new(IntSet::default());
}

/// An empty set for a pass's storages (the previous pass's, cleared: its capacity kept).
pub fn spare_set() -> IntSet<usize> {
    SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// Keeps a pass's set for the next pass's `spare_set`.
fn keep_spare(mut set: IntSet<usize>) {
    set.clear();
    SPARE.with(|s| *s.borrow_mut() = set);
}

/// Whether the tensor whose TensorImpl is at the address is a parameter or a view of one
/// (FSDP2's gathered parameters are not among the storages a pass skips from its start).
type ParameterCheck = fn(usize) -> bool;
static PARAMETER_CHECK: OnceLock<ParameterCheck> = OnceLock::new();

/// The Python layer's parameter check (set once).
pub fn set_parameter_check(check: ParameterCheck) {
    let _ = PARAMETER_CHECK.set(check);
}

/// A root module call starts a forward pass on this thread; `skip` holds the storages of its
/// parameters and buffers; `interposed`: the stand-in for SavedVariable's constructor counts
/// what the pass saves (else a hook does, or nothing).
pub fn begin(device_index: c_int, skip: IntSet<usize>, interposed: bool) {
    crate::torch::saved_counting(interposed);
    let previous = PASS.with(|p| {
        p.borrow_mut().replace(Pass {
            device_index,
            skip,
            bytes: 0,
        })
    });
    if let Some(previous) = previous {
        keep_spare(previous.skip);
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
        keep_spare(pass.skip);
    }
}

/// The measured device of this thread's pass (-1: the CPU, also when no pass runs).
pub fn device_index() -> c_int {
    PASS.with(|p| p.borrow().as_ref().map_or(-1, |p| p.device_index))
}

/// A saved tensor's storage at `ptr` of `nbytes`: counted unless the pass skips or has counted
/// it, or `is_parameter` (asked only then) says it is a parameter's.
pub fn count(ptr: usize, nbytes: u64, is_parameter: impl FnOnce() -> bool) {
    let open = PASS.with(|p| matches!(p.borrow().as_ref(), Some(p) if !p.skip.contains(&ptr)));
    // The check runs outside the borrow: it may run Python.
    if !open || is_parameter() {
        return;
    }
    PASS.with(|p| {
        if let Some(p) = p.borrow_mut().as_mut() {
            if p.skip.insert(ptr) {
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
        count(ptr, nbytes, || {
            PARAMETER_CHECK.get().is_some_and(|check| check(impl_ptr))
        });
    });
}
