//! Capture: turning the hooks' events into measured executions of lines and module calls. The
//! recorder (frames, lines, the schedule, line marks), the sampler (reading the allocator), host
//! memory, module calls' windows and backward passes, signals, and the child processes followed.
//! Knows nothing of Python objects: the hooks hand it addresses. Uses `torch`, `model` and `error`.
pub mod backward;
pub mod children;
pub mod device_use;
pub mod growth;
pub mod history;
pub mod host;
pub mod int_hash;
pub mod interrupt;
pub mod module_windows;
pub mod peak;
pub mod prefetch;
pub mod recorder;
pub mod sampler;
pub mod saved;
pub mod so_far;
#[cfg(test)]
pub mod test_torch;
pub mod timeline;

/// Loads memprof's torch library for the torch at `torch_root` (version `version`), wired to
/// capture's handlers of the allocator's and autograd's events.
pub fn load_torch(torch_root: &std::path::Path, version: &str) -> crate::error::Result<()> {
    static CALLBACKS: crate::torch::Callbacks = crate::torch::Callbacks {
        allocation_event: peak::mp_rust_allocation_event,
        grad_events: backward::mp_rust_grad_events,
        segment_event: peak::mp_rust_segment_event,
        saved_tensor: saved::mp_rust_saved_tensor,
        history_event: history::mp_rust_history_event,
    };
    crate::torch::loader::load(torch_root, version, &CALLBACKS)
}
