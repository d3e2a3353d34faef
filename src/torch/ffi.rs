//! The shim's C ABI (src/torch/cpp/shim.cpp). Each function catches C++ exceptions and returns -1,
//! leaving the message for `mp_last_error`.
use std::os::raw::{c_char, c_int};

extern "C" {
    /// Copies the last error message of this thread, NUL-terminated, into `buf`.
    pub fn mp_last_error(buf: *mut c_char, len: usize);
    /// The libtorch version compiled in, e.g. "2.11.0".
    pub fn mp_torch_version() -> *const c_char;
    /// Path of the libc10.so this process loaded.
    pub fn mp_libc10_path(buf: *mut c_char, len: usize) -> c_int;
    /// Number of CUDA devices (0 without a driver); creates no CUDA context.
    pub fn mp_cuda_device_count(out: *mut c_int) -> c_int;
    /// 1 once the program has initialised the CUDA caching allocator.
    pub fn mp_allocator_initialized(out: *mut c_int) -> c_int;
    pub fn mp_cuda_trace_enable(on: c_int) -> c_int;
    pub fn mp_reporter_device() -> c_int;
    pub fn mp_device_memory_info(device: c_int, free: *mut i64, total: *mut i64) -> c_int;
    /// Writes the 122 allocator stats of `device` in src/model/stats.rs order.
    pub fn mp_device_stats(device: c_int, out: *mut i64) -> c_int;
    /// `torch.cuda.reset_peak_memory_stats(device)`.
    pub fn mp_reset_peak_stats(device: c_int) -> c_int;
    /// Installs the allocation reporter on this thread, counting CUDA `device` (-1: none).
    pub fn mp_reporter_install(device: c_int) -> c_int;
    /// Installs the reporter on this thread if it has no profiler state.
    pub fn mp_reporter_attach_thread() -> c_int;
    /// The calling thread's own net allocated bytes (0 CPU, 1 the counted device).
    pub fn mp_own_net(device: c_int) -> i64;
    /// Starts remembering which line allocated each block of the profiled device.
    pub fn mp_history_start(max_entries: u64);
    pub fn mp_history_stop(dropped: *mut u64) -> u64;
    pub fn mp_history_read(
        n: u64,
        ptrs: *mut u64,
        sizes: *mut i64,
        times: *mut i64,
        tags: *mut u64,
    );
    pub fn mp_tags_enable();
    /// Sets the line now running (0: none).
    pub fn mp_tag_set(tag: u64);
    /// The tag of the live block at `ptr` (0: unknown).
    pub fn mp_tag_of(ptr: *const std::ffi::c_void) -> u64;
    /// The CUDA device the calling thread uses, or -1 before CUDA is initialised.
    pub fn mp_current_device(out: *mut c_int) -> c_int;
    /// Makes the reporter count `device`, its tally restarting at that device's current bytes.
    pub fn mp_reporter_set_device(device: c_int) -> c_int;
    /// Starts counting the bytes of torch.distributed collectives.
    pub fn mp_collectives_enable() -> c_int;
    /// Stops counting collectives and removes the callback.
    pub fn mp_collectives_disable();
    /// What the next c10d op of this thread carries, if its inputs do not show (-1: nothing).
    pub fn mp_collectives_expect(kind: c_int, bytes: i64);
    /// Bytes (8) then calls (8) per kind of collective, since the start.
    pub fn mp_collectives_take(out: *mut i64);
    /// Hooks the autograd node that produced a tensor (its TensorImpl), for `--modules`
    /// (grad_hooks.cpp): 1 hooked, 0 a leaf (no node), -1 an error.
    pub fn mp_grad_hook(tensor_impl: *mut std::ffi::c_void, token: u64, kind: c_int) -> c_int;
    /// Whether autograd records on this thread (grad_hooks.cpp): 1 or 0.
    pub fn mp_grad_enabled() -> c_int;
    /// Notes the site of the backward the calling thread runs (0: none); returns the previous.
    pub fn mp_backward_site_set(site: u32) -> u32;
    /// Reads a tally (0 CPU, 1 device) and restarts its maxima; see `Tally` in shim.cpp.
    pub fn mp_tally_take(which: c_int, out: *mut i64);
    pub fn mp_adopt_cpu_storages(impls: *const u64, n: usize) -> i64;
}
