//! Asking the processor for a cache line before it is read or written: for memory a step's
//! work has left out of the cache, fetched ahead so that its misses overlap with other work (or
//! with each other) instead of stalling where it is used. Uses nothing.

/// Asks for the cache line at `address` (nothing where the processor has no such hint). Any
/// address will do: a prefetch reads nothing into the program and cannot fault.
#[inline]
pub fn line<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
