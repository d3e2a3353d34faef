//! Safe access to libtorch through the shim (cpp/, its C ABI in ffi.rs): allocator stats, the
//! allocation reporter, tags, histories, collectives, and the facts the start-up check compares
//! (version, loaded libc10); `Runtime`, the calls capture makes, as a trait. Uses `model` and
//! `error`.
pub mod driver;
mod ffi;
pub mod loader;
pub mod releases;

pub use ffi::{Callbacks, GradCall};

use crate::error::{Error, Result};
use crate::model::stats::CUDA_STAT_COUNT;
use std::ffi::CStr;
use std::os::raw::c_int;

/// Hooks the autograd nodes that produced tensors (their TensorImpl addresses) for `--modules`'
/// C++ gradient hooks, each for `call`; the number hooked (leaves have none; none on error).
///
/// # Safety
/// Each address must be the TensorImpl of a tensor that stays alive during the call.
pub unsafe fn grad_hooks(tensor_impls: &[usize], call: &GradCall) -> u32 {
    // SAFETY: per the contract above; the shim catches every C++ exception.
    let n = unsafe { ffi::mp_grad_hooks(tensor_impls.as_ptr(), tensor_impls.len(), call) };
    n.max(0) as u32
}

/// The TensorImpl address of the Python tensor `object`, read from the object; None where the
/// shim does not know this release's layout (src/torch/cpp/tensor_object.cpp).
///
/// # Safety
/// `object` must be a live instance of torch.Tensor (or a subclass).
pub unsafe fn tensor_impl_of(object: *const std::ffi::c_void) -> Option<usize> {
    // SAFETY: per the contract above; the shim only reads the object.
    let address = unsafe { ffi::mp_tensor_impl_of(object) };
    (!address.is_null()).then_some(address as usize)
}

/// Whether the tensor whose TensorImpl is at `tensor_impl` has no node in the autograd graph
/// (no grad_fn), so that keeping it keeps no node alive.
///
/// # Safety
/// `tensor_impl` must be the TensorImpl of a tensor that stays alive during the call.
pub unsafe fn holds_no_node(tensor_impl: usize) -> bool {
    // SAFETY: per the contract above; the shim catches every C++ exception.
    unsafe { ffi::mp_has_grad_fn(tensor_impl as *mut std::ffi::c_void) == 0 }
}

/// What the shim reads of the tensor whose TensorImpl is at `tensor_impl`: its answer (-1, 0 or
/// 1, see saved_info.cpp), version, storage address and bytes.
///
/// # Safety
/// `tensor_impl` must be the TensorImpl of a tensor that stays alive during the call.
pub unsafe fn saved_info(tensor_impl: usize, device_index: c_int) -> (c_int, i64, usize, u64) {
    let (mut version, mut ptr, mut nbytes) = (0i64, 0usize, 0u64);
    // SAFETY: per the contract above.
    let found = unsafe {
        ffi::mp_saved_info(
            tensor_impl as *mut std::ffi::c_void,
            device_index,
            &mut version,
            &mut ptr,
            &mut nbytes,
        )
    };
    (found, version, ptr, nbytes)
}

/// The storage (address, bytes) of the tensor whose TensorImpl is at `tensor_impl`, when it is
/// on the CUDA device `device_index` (-1: the CPU) and has one; its version is not read (one
/// memory access fewer than `saved_info`, for every tensor a pass saves or skips).
///
/// # Safety
/// `tensor_impl` must be the TensorImpl of a tensor that stays alive during the call.
pub unsafe fn storage_on(tensor_impl: usize, device_index: c_int) -> Option<(usize, u64)> {
    let (mut ptr, mut nbytes) = (0usize, 0u64);
    // SAFETY: per the contract above.
    let found = unsafe {
        ffi::mp_storage_on(
            tensor_impl as *mut std::ffi::c_void,
            device_index,
            &mut ptr,
            &mut nbytes,
        )
    };
    (found == 1).then_some((ptr, nbytes))
}

/// The storage addresses of many tensors, read at once (`read`), into buffers kept from read
/// to read: a root module's parameters and buffers are read at each of its calls, and buffers
/// of their size made anew each time were large requests that made glibc consolidate its free
/// lists (about 1,000 instructions more a module call, counted by
/// `benches/module_call_instructions.sh`).
#[derive(Default)]
pub struct Storages {
    counted: Vec<u8>,
    ptrs: Vec<usize>,
}

impl Storages {
    /// `storage_on`'s addresses for each of `tensor_impls`: the shim reads them in passes, each
    /// prefetching what the next reads, so that the misses to memory of many tensors overlap.
    ///
    /// # Safety
    /// Each of `tensor_impls` must be the TensorImpl of a tensor that stays alive during the
    /// call.
    pub unsafe fn read(&mut self, tensor_impls: &[usize], device_index: c_int) {
        let n = tensor_impls.len();
        self.counted.resize(n, 0);
        self.ptrs.resize(n, 0);
        // SAFETY: per the contract above; each output holds `n` items.
        unsafe {
            ffi::mp_storages_on(
                tensor_impls.as_ptr().cast(),
                n,
                device_index,
                self.counted.as_mut_ptr(),
                self.ptrs.as_mut_ptr(),
            )
        };
    }

    /// The addresses of the last `read`'s storages that count, in order.
    pub fn counted(&self) -> impl Iterator<Item = usize> + '_ {
        self.counted
            .iter()
            .zip(&self.ptrs)
            .filter(|(&c, _)| c == 1)
            .map(|(_, &ptr)| ptr)
    }
}

/// The Python objects (null where none) of the tensor whose TensorImpl is at `tensor_impl` and
/// of its base when it is a view; None on error.
///
/// # Safety
/// `tensor_impl` must be the TensorImpl of a tensor that stays alive during the call.
pub unsafe fn tensor_pyobjs(tensor_impl: usize) -> Option<(usize, usize)> {
    let (mut obj, mut base) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: per the contract above; the shim catches every C++ exception.
    let status =
        unsafe { ffi::mp_tensor_pyobjs(tensor_impl as *mut std::ffi::c_void, &mut obj, &mut base) };
    (status == 0).then_some((obj as usize, base as usize))
}

/// Turns `--modules`' native saved-tensors hooks on where `pack` (the address of memprof's pack
/// hook object, kept alive by the caller) tops a thread's hook stack, or off (0). True when on.
///
/// # Safety
/// libtorch must be loaded; `pack` must stay alive while the hooks are on.
pub unsafe fn native_saved_hooks(pack: usize) -> bool {
    // SAFETY: per the contract above; the shim catches every C++ exception.
    unsafe { ffi::mp_native_saved_hooks(pack as *mut std::ffi::c_void) == 1 }
}

/// Counts saved tensors without hooks from now on (true: memprof stands in for SavedVariable's
/// constructor in torch's libraries), or stops (false). True when it stands in.
///
/// # Safety
/// libtorch must be loaded.
pub unsafe fn saved_interpose(on: bool) -> bool {
    // SAFETY: per the contract above; the shim catches every C++ exception.
    unsafe { ffi::mp_saved_interpose(c_int::from(on)) > 0 }
}

/// Whether the calling thread's forward pass counts the tensors that the stand-in for
/// SavedVariable's constructor sees (`saved_interpose`).
pub fn saved_counting(on: bool) {
    // SAFETY: sets a thread-local flag of the shim.
    unsafe { ffi::mp_saved_counting(c_int::from(on)) }
}

/// Whether autograd records on this thread now (`torch.is_grad_enabled()`).
///
/// # Safety
/// libtorch must be loaded (it is, once the program has imported torch).
pub unsafe fn grad_enabled() -> bool {
    // SAFETY: reads a thread-local flag; per the contract above.
    unsafe { ffi::mp_grad_enabled() == 1 }
}

/// Number of values in one tally read (see `mp_tally_take`).
pub const TALLY_LEN: usize = 11;
/// Indices into a tally read.
pub mod tally {
    pub const ALLOCATED_CURRENT: usize = 0;
    pub const ALLOCATED_MAX: usize = 1;
    pub const RESERVED_MAX: usize = 3;
    pub const BYTES_ALLOCATED: usize = 4;
    pub const BYTES_FREED: usize = 5;
    pub const COUNT_CURRENT: usize = 6;
    pub const COUNT_MAX: usize = 7;
    pub const COUNT_ALLOCATED: usize = 8;
    pub const COUNT_FREED: usize = 9;
}

fn last_error() -> String {
    let mut buf = [0 as std::os::raw::c_char; 512];
    // SAFETY: the shim writes at most len bytes, NUL-terminated.
    unsafe {
        ffi::mp_last_error(buf.as_mut_ptr(), buf.len());
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    }
}

fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "libtorch failed to {what}: {}",
            last_error()
        )))
    }
}

/// The libtorch version memprof's loaded torch library was built against (`2.11.0`), or
/// "unknown" before one is loaded.
pub fn linked_version() -> String {
    if !ffi::installed() {
        return "unknown".into();
    }
    // SAFETY: returns a static string.
    unsafe {
        CStr::from_ptr(ffi::mp_torch_version())
            .to_string_lossy()
            .into_owned()
    }
}

/// Path of the libc10.so loaded into this process.
pub fn loaded_libc10() -> Option<String> {
    let mut buf = [0 as std::os::raw::c_char; 4096];
    // SAFETY: the shim writes at most len bytes, NUL-terminated.
    unsafe {
        (ffi::mp_libc10_path(buf.as_mut_ptr(), buf.len()) == 0)
            .then(|| CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
    }
}

/// Number of CUDA devices visible (0 without a GPU or driver): torch's count once memprof's
/// torch library is loaded (0 for a CPU-only torch), the driver's before.
pub fn cuda_device_count() -> i32 {
    if !ffi::installed() {
        return driver::cuda_device_count();
    }
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    let rc = unsafe { ffi::mp_cuda_device_count(&mut n) };
    if rc == 0 {
        n
    } else {
        0
    }
}

/// Whether the program has initialised the CUDA caching allocator.
pub fn allocator_initialized() -> bool {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    let rc = unsafe { ffi::mp_allocator_initialized(&mut n) };
    rc == 0 && n == 1
}

/// Starts or stops taking the CUDA allocator's own trace entries (the sizes requested and the
/// streams) for `--trace`; false where there is no CUDA caching allocator to trace (a CPU build,
/// another allocator backend, CUDA not initialised yet).
pub fn cuda_trace_enable(on: bool) -> bool {
    // SAFETY: plain call.
    unsafe { ffi::mp_cuda_trace_enable(c_int::from(on)) == 0 }
}

/// Starts or stops handing every trace entry of the CUDA allocator to `--history`'s record
/// (`capture::history`); false where there is no CUDA caching allocator to trace.
pub fn cuda_history_enable(on: bool) -> bool {
    if !ffi::installed() {
        return false; // nothing to stop before memprof's torch library is loaded
    }
    // SAFETY: plain call.
    unsafe { ffi::mp_cuda_history_enable(c_int::from(on)) == 0 }
}

/// The device's free and total bytes as the driver reads them (every process's use counts).
pub fn device_memory_info(device: i32) -> Option<(i64, i64)> {
    let (mut free, mut total) = (0i64, 0i64);
    // SAFETY: writes two i64.
    let rc = unsafe { ffi::mp_device_memory_info(device, &mut free, &mut total) };
    (rc == 0).then_some((free, total))
}

/// The CUDA device the allocation reporter counts (-1: the CPU).
pub fn reporter_device() -> i32 {
    // SAFETY: reads an atomic.
    unsafe { ffi::mp_reporter_device() }
}

/// Reads the device's 122 allocator stats into `out`.
pub fn device_stats(device: i32, out: &mut [i64; CUDA_STAT_COUNT]) -> Result<()> {
    // SAFETY: out has room for the 122 values the shim writes.
    check(
        unsafe { ffi::mp_device_stats(device, out.as_mut_ptr()) },
        "read allocator stats",
    )
}

/// The device's allocator stats read now, looked up by key (`reserved_bytes.all.current`).
pub fn device_stats_now(device: i32) -> Option<impl Fn(&str) -> Option<i64>> {
    let mut values = [0i64; CUDA_STAT_COUNT];
    device_stats(device, &mut values).ok()?;
    let defs = crate::model::stats::cuda_stats();
    Some(move |key: &str| {
        defs.iter()
            .find(|d| d.key == key)
            .and_then(|d| d.cuda_index)
            .map(|i| values[i])
    })
}

/// Resets the device's peak stats to their current values.
pub fn reset_peak_stats(device: i32) -> Result<()> {
    // SAFETY: plain call.
    check(
        unsafe { ffi::mp_reset_peak_stats(device) },
        "reset peak stats",
    )
}

/// The CUDA device the calling thread uses now; None before the program initialised CUDA.
pub fn current_device() -> Option<i32> {
    let mut n: c_int = -1;
    // SAFETY: writes one int.
    let rc = unsafe { ffi::mp_current_device(&mut n) };
    (rc == 0 && n >= 0).then_some(n)
}

/// Makes the reporter count `device` from now on (its tally restarts at that device's bytes).
pub fn set_reporter_device(device: i32) -> Result<()> {
    // SAFETY: plain call.
    check(
        unsafe { ffi::mp_reporter_set_device(device) },
        "switch the memory reporter to another device",
    )
}

/// CPU storages live before the reporter first listened (`impls`: their StorageImpl addresses,
/// alive during the call): their sizes become known to c10's CPU reporter and the CPU tally
/// counts them. Returns the bytes taken in.
pub fn adopt_cpu_storages(impls: &[u64]) -> i64 {
    // SAFETY: the caller keeps each StorageImpl alive for the call (Python holds them).
    unsafe { ffi::mp_adopt_cpu_storages(impls.as_ptr(), impls.len()) }
}

/// Installs the allocation reporter on the calling thread.
pub fn install_reporter(device: Option<i32>) -> Result<()> {
    // SAFETY: plain call.
    check(
        unsafe { ffi::mp_reporter_install(device.unwrap_or(-1)) },
        "install the memory reporter",
    )
}

/// Installs the reporter on the calling thread (a thread started by the program).
pub fn attach_reporter_to_thread() {
    // SAFETY: plain call; a failure only means this thread's allocations are seen through stats.
    unsafe { ffi::mp_reporter_attach_thread() };
}

/// Notes on the calling thread's reporter the site of the backward pass it is about to run, for
/// the allocations autograd's threads make for it (0: none); returns the previous one.
pub fn set_backward_site(site: u32) -> u32 {
    // SAFETY: plain call.
    unsafe { ffi::mp_backward_site_set(site) }
}

/// The net bytes the calling thread (and the threads working for it, such as autograd's) has
/// allocated on the CPU (`device == false`) or the counted CUDA device: what a line's Δ counts.
pub fn own_net(device: bool) -> i64 {
    // SAFETY: plain call.
    unsafe { ffi::mp_own_net(i32::from(device)) }
}

/// Reads the CPU tally (`device == false`) or the CUDA device's, restarting its maxima.
pub fn take_tally(device: bool, out: &mut [i64; TALLY_LEN]) {
    // SAFETY: out has room for the 11 values.
    unsafe { ffi::mp_tally_take(i32::from(device), out.as_mut_ptr()) }
}

/// A module scope's reading of the CPU tally (`device == false`) or the CUDA device's: allocated
/// bytes now and their maximum since the previous take of either kind, which restarts; the next
/// `take_tally` still sees that maximum.
pub fn take_allocated(device: bool) -> (i64, i64) {
    let (mut current, mut max) = (0, 0);
    // SAFETY: writes two values.
    unsafe { ffi::mp_tally_take_allocated(i32::from(device), &mut current, &mut max) };
    (current, max)
}

/// Allocation tags (`--tensors`): which targeted line allocated each live block.
pub mod tags {
    use super::ffi;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Starts tagging allocations of the profiled device.
    pub fn enable() {
        // SAFETY: no arguments; sets an atomic.
        unsafe { ffi::mp_tags_enable() }
    }

    /// A line's tag: its function id plus one in the high half, its line number in the low
    /// half; 0 is no line.
    #[inline]
    pub fn encode(func: Option<u32>, line: u32) -> u64 {
        func.map_or(0, |f| (u64::from(f) + 1) << 32 | u64::from(line))
    }

    /// The function id and line of a tag, None for 0.
    pub fn decode(tag: u64) -> Option<(u32, u32)> {
        (tag != 0).then(|| (((tag >> 32) - 1) as u32, tag as u32))
    }

    /// The line running now, as the shim's tags have it (`--history` records it with each
    /// CPU event).
    static CURRENT: AtomicU64 = AtomicU64::new(0);

    /// Tags what is allocated from now on with this line (None: no line).
    #[inline]
    pub fn set(func: Option<u32>, line: u32) {
        let tag = encode(func, line);
        CURRENT.store(tag, Ordering::Relaxed);
        // SAFETY: stores an atomic.
        unsafe { ffi::mp_tag_set(tag) }
    }

    /// The tag of the line running now (0: none).
    #[inline]
    pub fn current() -> u64 {
        CURRENT.load(Ordering::Relaxed)
    }

    /// The function id and line that allocated the live block at `ptr`, if a targeted line did.
    pub fn of(ptr: usize) -> Option<(u32, u32)> {
        // SAFETY: only looks the address up.
        decode(unsafe { ffi::mp_tag_of(ptr as *const std::ffi::c_void) })
    }
}

/// `--collectives`: the bytes of torch.distributed collectives, by kind, counted where libtorch
/// dispatches its c10d ops (on whichever thread issues them: the program, DDP's reducer, FSDP).
pub mod collectives {
    use super::{check, ffi, Result};

    /// The kinds, in the shim's order.
    pub use crate::model::profile::COLLECTIVE_KINDS as KINDS;
    /// Values per read: bytes per kind, then calls per kind.
    pub const LEN: usize = 2 * KINDS.len();

    /// Starts counting.
    pub fn enable() -> Result<()> {
        // SAFETY: plain call.
        check(
            unsafe { ffi::mp_collectives_enable() },
            "watch torch.distributed collectives",
        )
    }

    /// Stops counting; dispatched ops no longer pass memprof's callback.
    pub fn disable() {
        // SAFETY: plain call.
        unsafe { ffi::mp_collectives_disable() }
    }

    /// What the next c10d op of this thread carries, as the program's Python call of the
    /// process group gives it: counted for an op whose inputs the dispatcher does not show
    /// (None forgets it).
    pub fn expect(kind: Option<&str>, bytes: i64) {
        let k = kind
            .and_then(|kind| KINDS.iter().position(|k| *k == kind))
            .map_or(-1, |k| k as i32);
        // SAFETY: plain call; the shim checks the index.
        unsafe { ffi::mp_collectives_expect(k, bytes) }
    }

    /// The counters since the start: bytes per kind, then calls per kind.
    pub fn take(out: &mut [i64; LEN]) {
        // SAFETY: out has room for the 16 values.
        unsafe { ffi::mp_collectives_take(out.as_mut_ptr()) }
    }
}

/// The libtorch calls that capture makes while the program runs, behind one trait: `Linked` is
/// the libtorch this process loaded; the recorder's and the sampler's unit tests run their state
/// machines on a stand-in (`capture::test_torch`), without libtorch.
pub trait Runtime {
    /// Whether the program has initialised the CUDA caching allocator.
    fn allocator_initialized(&self) -> bool;
    /// Reads the device's allocator stats; false on failure.
    fn device_stats(&self, device: i32, out: &mut [i64; CUDA_STAT_COUNT]) -> bool;
    /// Resets the device's peak stats to their current values; false on failure.
    fn reset_peak_stats(&self, device: i32) -> bool;
    /// Makes the allocation reporter count `device`; false on failure.
    fn set_reporter_device(&self, device: i32) -> bool;
    /// The CUDA device the calling thread uses now.
    fn current_device(&self) -> Option<i32>;
    /// Reads a tally (the CPU's, or the counted CUDA device's), restarting its maxima.
    fn take_tally(&self, device: bool, out: &mut [i64; TALLY_LEN]);
    /// The calling thread's own net allocated bytes.
    fn own_net(&self, device: bool) -> i64;
    /// The collectives' counters since the start.
    fn take_collectives(&self, out: &mut [i64; collectives::LEN]);
    /// Starts tagging allocations with the running line.
    fn tags_enable(&self);
    /// Starts handing the CUDA allocator's trace entries to `--history`; false where there is
    /// no caching allocator to trace.
    fn cuda_history_enable(&self, on: bool) -> bool;
    /// The line that allocations are tagged with from now on.
    fn tag_set(&self, func: Option<u32>, line: u32);
    /// The line that allocated the live block at `ptr`.
    fn tag_of(&self, ptr: usize) -> Option<(u32, u32)>;
}

/// The libtorch this process loaded, through the shim.
#[derive(Clone, Copy, Debug, Default)]
pub struct Linked;

impl Runtime for Linked {
    #[inline]
    fn allocator_initialized(&self) -> bool {
        allocator_initialized()
    }
    #[inline]
    fn device_stats(&self, device: i32, out: &mut [i64; CUDA_STAT_COUNT]) -> bool {
        device_stats(device, out).is_ok()
    }
    #[inline]
    fn reset_peak_stats(&self, device: i32) -> bool {
        reset_peak_stats(device).is_ok()
    }
    fn set_reporter_device(&self, device: i32) -> bool {
        set_reporter_device(device).is_ok()
    }
    #[inline]
    fn current_device(&self) -> Option<i32> {
        current_device()
    }
    #[inline]
    fn take_tally(&self, device: bool, out: &mut [i64; TALLY_LEN]) {
        take_tally(device, out)
    }
    #[inline]
    fn own_net(&self, device: bool) -> i64 {
        own_net(device)
    }
    #[inline]
    fn take_collectives(&self, out: &mut [i64; collectives::LEN]) {
        collectives::take(out)
    }
    fn tags_enable(&self) {
        tags::enable()
    }
    fn cuda_history_enable(&self, on: bool) -> bool {
        cuda_history_enable(on)
    }
    #[inline]
    fn tag_set(&self, func: Option<u32>, line: u32) {
        tags::set(func, line)
    }
    fn tag_of(&self, ptr: usize) -> Option<(u32, u32)> {
        tags::of(ptr)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tag_carries_its_function_and_line_and_zero_is_none() {
        use super::tags::{decode, encode};
        assert_eq!(decode(encode(Some(0), 7)), Some((0, 7)));
        assert_eq!(decode(encode(Some(41), u32::MAX)), Some((41, u32::MAX)));
        assert_eq!(encode(None, 12), 0);
        assert_eq!(decode(0), None);
    }
}
