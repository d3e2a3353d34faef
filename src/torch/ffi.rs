//! The shim's C ABI (src/torch/cpp/shim.cpp), resolved from the library that fits the script's
//! torch (loader.rs). Each function catches C++ exceptions and returns -1, leaving the message
//! for `mp_last_error`. Every function here requires the library loaded (`loader::load`);
//! calling one before is a bug in memprof, reported as such.
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};
use std::sync::OnceLock;

/// One module call's concern with a gradient, as a C++ gradient hook holds it (`MpGradCall` in
/// src/torch/cpp/callbacks.h): the call's token, the event's kind and, for an output's, the
/// call's forward entry and number of hooked inputs.
#[repr(C)]
pub struct GradCall {
    pub token: u64,
    pub kind: i32,
    pub entry: u32,
    pub inputs: u32,
}

/// What the shim calls in memprof's core (src/torch/cpp/callbacks.h), handed over at load.
#[repr(C)]
pub struct Callbacks {
    pub allocation_event: extern "C" fn(u64, i64, u32, i32, i64, i64, i64, u64),
    pub grad_events: extern "C" fn(*const GradCall, usize) -> c_int,
    pub segment_event: extern "C" fn(i32, i64, u64),
    pub saved_tensor: extern "C" fn(*mut c_void),
    pub history_event: extern "C" fn(i32, u64, i64, u64, i32),
}

/// Declares the shim's functions once: a table of pointers resolved by name (`Shim::resolve`)
/// and, for each, a function of the same name and signature that calls through the table.
macro_rules! shim_functions {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?; )*) => {
        /// The shim's functions, resolved from one loaded library.
        pub struct Shim {
            $( $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?, )*
        }

        impl Shim {
            /// Resolves every function through `symbol` (the library's dlsym); the name of the
            /// first one missing, if any.
            pub fn resolve(
                symbol: impl Fn(&std::ffi::CStr) -> Option<*mut c_void>,
            ) -> Result<Shim, &'static str> {
                Ok(Shim {
                    $( $name: {
                        let name = concat!(stringify!($name), "\0");
                        let c = std::ffi::CStr::from_bytes_with_nul(name.as_bytes())
                            .expect("a NUL-terminated name");
                        let f = symbol(c).ok_or(stringify!($name))?;
                        // SAFETY: the shim defines this symbol with this C signature
                        // (src/torch/cpp), which this declaration mirrors.
                        unsafe {
                            std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) $(-> $ret)?>(f)
                        }
                    }, )*
                })
            }
        }

        $(
            $(#[$doc])*
            ///
            /// # Safety
            /// As the shim's function of this name requires (pointers valid for what it writes).
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                // SAFETY: per this function's contract.
                unsafe { (shim().$name)($($arg),*) }
            }
        )*
    };
}

shim_functions! {
    /// Hands the shim memprof's functions; called once, at load.
    fn mp_set_callbacks(callbacks: *const Callbacks);
    /// Copies the last error message of this thread, NUL-terminated, into `buf`.
    fn mp_last_error(buf: *mut c_char, len: usize);
    /// The libtorch version compiled in, e.g. "2.11.0".
    fn mp_torch_version() -> *const c_char;
    /// Path of the libc10.so this process loaded.
    fn mp_libc10_path(buf: *mut c_char, len: usize) -> c_int;
    /// Number of CUDA devices (0 without a driver); creates no CUDA context.
    fn mp_cuda_device_count(out: *mut c_int) -> c_int;
    /// 1 once the program has initialised the CUDA caching allocator.
    fn mp_allocator_initialized(out: *mut c_int) -> c_int;
    fn mp_cuda_trace_enable(on: c_int) -> c_int;
    /// Starts or stops handing the CUDA allocator's trace entries to `--history`.
    fn mp_cuda_history_enable(on: c_int) -> c_int;
    fn mp_reporter_device() -> c_int;
    fn mp_device_memory_info(device: c_int, free: *mut i64, total: *mut i64) -> c_int;
    /// Writes the 122 allocator stats of `device` in src/model/stats.rs order.
    fn mp_device_stats(device: c_int, out: *mut i64) -> c_int;
    /// `torch.cuda.reset_peak_memory_stats(device)`.
    fn mp_reset_peak_stats(device: c_int) -> c_int;
    /// Installs the allocation reporter on this thread, counting CUDA `device` (-1: none).
    fn mp_reporter_install(device: c_int) -> c_int;
    /// Installs the reporter on this thread if it has no profiler state.
    fn mp_reporter_attach_thread() -> c_int;
    /// The calling thread's own net allocated bytes (0 CPU, 1 the counted device).
    fn mp_own_net(device: c_int) -> i64;
    /// Starts remembering which line allocated each block of the profiled device.
    fn mp_tags_enable();
    /// Sets the line now running (0: none).
    fn mp_tag_set(tag: u64);
    /// The tag of the live block at `ptr` (0: unknown).
    fn mp_tag_of(ptr: *const c_void) -> u64;
    /// The CUDA device the calling thread uses, or -1 before CUDA is initialised.
    fn mp_current_device(out: *mut c_int) -> c_int;
    /// Makes the reporter count `device`, its tally restarting at that device's current bytes.
    fn mp_reporter_set_device(device: c_int) -> c_int;
    /// Starts counting the bytes of torch.distributed collectives.
    fn mp_collectives_enable() -> c_int;
    /// Stops counting collectives and removes the callback.
    fn mp_collectives_disable();
    /// What the next c10d op of this thread carries, if its inputs do not show (-1: nothing).
    fn mp_collectives_expect(kind: c_int, bytes: i64);
    /// Bytes (8) then calls (8) per kind of collective, since the start.
    fn mp_collectives_take(out: *mut i64);
    /// Hooks the autograd nodes that produced `n` tensors (their TensorImpls), for `--modules`
    /// (grad_hooks.cpp): the number hooked (leaves have no node), -1 an error.
    fn mp_grad_hooks(tensor_impls: *const usize, n: usize, call: *const GradCall) -> c_int;
    /// Whether autograd records on this thread (grad_hooks.cpp): 1 or 0.
    fn mp_grad_enabled() -> c_int;
    /// Notes the site of the backward the calling thread runs (0: none); returns the previous.
    fn mp_backward_site_set(site: u32) -> u32;
    /// Reads a tally (0 CPU, 1 device) and restarts its maxima; see `Tally` in shim.cpp.
    fn mp_tally_take(which: c_int, out: *mut i64);
    /// A module scope's take of a tally's allocated bytes: now, and their maximum since the
    /// previous take (which the next full take still sees).
    fn mp_tally_take_allocated(which: c_int, current: *mut i64, max: *mut i64);
    fn mp_adopt_cpu_storages(impls: *const u64, n: usize) -> i64;
    /// The TensorImpl of a Python tensor object, read from the object (tensor_object.cpp);
    /// null where this release's layout is not known.
    fn mp_tensor_impl_of(object: *const c_void) -> *mut c_void;
    /// Whether a tensor has a grad_fn (grad_hooks.cpp): 1 or 0, -1 an error.
    fn mp_has_grad_fn(tensor_impl: *mut c_void) -> c_int;
    /// A saved tensor's version and storage (saved_info.cpp): 1 counted on `device_index`'s
    /// device, 0 not, -1 an error.
    fn mp_saved_info(
        tensor_impl: *mut c_void,
        device_index: c_int,
        version: *mut i64,
        storage_ptr: *mut usize,
        storage_nbytes: *mut u64
    ) -> c_int;
    /// A tensor's storage, without its version (saved_info.cpp): 1 on `device_index`'s device,
    /// 0 not.
    fn mp_storage_on(
        tensor_impl: *mut c_void,
        device_index: c_int,
        storage_ptr: *mut usize,
        storage_nbytes: *mut u64
    ) -> c_int;
    /// `mp_storage_on` for `n` tensors at once, prefetched pass by pass (saved_info.cpp): per
    /// tensor, counted (1 or 0), then its storage's address.
    fn mp_storages_on(
        tensor_impls: *const *mut c_void,
        n: usize,
        device_index: c_int,
        counted: *mut u8,
        storage_ptrs: *mut usize
    );
    /// The Python objects of a tensor and of its base when it is a view, null where none
    /// (saved_hooks.cpp): 0, or -1 an error.
    fn mp_tensor_pyobjs(tensor_impl: *mut c_void, obj: *mut *mut c_void, base: *mut *mut c_void) -> c_int;
    /// `--modules`' native saved-tensors hooks on where `pack` tops a thread's hook stack, or
    /// off (null) (saved_hooks.cpp): 1 on, 0 off, -1 not possible in this process.
    fn mp_native_saved_hooks(pack: *mut c_void) -> c_int;
    /// Stands in for SavedVariable's constructor in torch's libraries (1) or stops (0)
    /// (saved_interpose.cpp): the slots written, or -1 an error.
    fn mp_saved_interpose(on: c_int) -> c_int;
    /// Whether the calling thread's pass counts what the stand-in sees (saved_interpose.cpp).
    fn mp_saved_counting(on: c_int);
}

static SHIM: OnceLock<Shim> = OnceLock::new();

/// Makes `shim` the one every function here calls (once: the loader installs one library per
/// process, under its lock).
pub fn install(shim: Shim) {
    let _ = SHIM.set(shim);
}

/// Whether a library is loaded.
pub fn installed() -> bool {
    SHIM.get().is_some()
}

fn shim() -> &'static Shim {
    match SHIM.get() {
        Some(s) => s,
        // An entry point that reads libtorch before loading memprof's torch library: a bug in
        // memprof, never the user's; aborting beats calling through a null pointer.
        None => {
            eprintln!(
                "memprof: internal error: libtorch was read before memprof's torch library was \
                 loaded; please report this at the project's issue tracker"
            );
            std::process::abort()
        }
    }
}
