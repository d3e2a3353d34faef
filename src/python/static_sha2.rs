//! The SHA-2 functions that CPython 3.12's `_sha2` module calls, for a binary linked with a
//! static `libpython3.12.a` (build/libpython.rs). CPython builds them (HACL*, prefixed
//! `python_hashlib_`) into `Modules/_hacl/libHacl_Hash_SHA2.a`, which installations do not ship;
//! `python3` has them linked in, so memprof supplies the same streaming API, computed by the
//! `sha2` crate. The state is opaque to `_sha2` (it only passes the pointer back), so a boxed
//! hasher serves; the digests are the standard ones, as `tests/running.rs` checks against
//! hashlib's OpenSSL.
// The C names are CPython's (HACL*'s), not Rust's.
#![allow(non_snake_case)]

use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};

/// The state behind `_sha2.sha224`/`sha256` (`malloc_224`/`malloc_256`, then the `_256` calls).
#[derive(Clone)]
pub enum State256 {
    Sha224(Sha224),
    Sha256(Sha256),
}

/// The state behind `_sha2.sha384`/`sha512` (`malloc_384`/`malloc_512`, then the `_512` calls).
#[derive(Clone)]
pub enum State512 {
    Sha384(Sha384),
    Sha512(Sha512),
}

/// HACL*'s `Hacl_Streaming_Types_Success`.
const SUCCESS: u8 = 0;

fn boxed<T>(state: T) -> *mut T {
    Box::into_raw(Box::new(state))
}

/// # Safety
/// `input` points to `len` readable bytes (or `len` is 0).
unsafe fn bytes<'a>(input: *const u8, len: u32) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(input, len as usize)
    }
}

#[cfg_attr(memprof_static_sha2, no_mangle)]
pub extern "C" fn python_hashlib_Hacl_Hash_SHA2_malloc_224() -> *mut State256 {
    boxed(State256::Sha224(Sha224::new()))
}

#[cfg_attr(memprof_static_sha2, no_mangle)]
pub extern "C" fn python_hashlib_Hacl_Hash_SHA2_malloc_256() -> *mut State256 {
    boxed(State256::Sha256(Sha256::new()))
}

#[cfg_attr(memprof_static_sha2, no_mangle)]
pub extern "C" fn python_hashlib_Hacl_Hash_SHA2_malloc_384() -> *mut State512 {
    boxed(State512::Sha384(Sha384::new()))
}

#[cfg_attr(memprof_static_sha2, no_mangle)]
pub extern "C" fn python_hashlib_Hacl_Hash_SHA2_malloc_512() -> *mut State512 {
    boxed(State512::Sha512(Sha512::new()))
}

/// # Safety
/// `state` came from a `malloc_224`/`malloc_256`/`copy_256` and has not been freed.
#[cfg_attr(memprof_static_sha2, no_mangle)]
pub unsafe extern "C" fn python_hashlib_Hacl_Hash_SHA2_copy_256(
    state: *const State256,
) -> *mut State256 {
    boxed((*state).clone())
}

/// # Safety
/// As `copy_256`.
#[cfg_attr(memprof_static_sha2, no_mangle)]
pub unsafe extern "C" fn python_hashlib_Hacl_Hash_SHA2_copy_512(
    state: *const State512,
) -> *mut State512 {
    boxed((*state).clone())
}

/// # Safety
/// As `copy_256`; `input` points to `len` readable bytes.
#[cfg_attr(memprof_static_sha2, no_mangle)]
pub unsafe extern "C" fn python_hashlib_Hacl_Hash_SHA2_update_256(
    state: *mut State256,
    input: *const u8,
    len: u32,
) -> u8 {
    let data = bytes(input, len);
    match &mut *state {
        State256::Sha224(h) => h.update(data),
        State256::Sha256(h) => h.update(data),
    }
    SUCCESS
}

/// # Safety
/// As `copy_512`; `input` points to `len` readable bytes.
#[cfg_attr(memprof_static_sha2, no_mangle)]
pub unsafe extern "C" fn python_hashlib_Hacl_Hash_SHA2_update_512(
    state: *mut State512,
    input: *const u8,
    len: u32,
) -> u8 {
    let data = bytes(input, len);
    match &mut *state {
        State512::Sha384(h) => h.update(data),
        State512::Sha512(h) => h.update(data),
    }
    SUCCESS
}

/// Writes the digest of everything hashed so far and leaves the state as it was (`_sha2` calls
/// it for every `digest()`). `output` has room for 32 bytes; SHA-224 fills the first 28, the
/// part `_sha2` reads.
///
/// # Safety
/// As `copy_256`; `output` points to 32 writable bytes.
#[cfg_attr(memprof_static_sha2, no_mangle)]
pub unsafe extern "C" fn python_hashlib_Hacl_Hash_SHA2_digest_256(
    state: *const State256,
    output: *mut u8,
) {
    let digest: Vec<u8> = match &*state {
        State256::Sha224(h) => h.clone().finalize().to_vec(),
        State256::Sha256(h) => h.clone().finalize().to_vec(),
    };
    std::ptr::copy_nonoverlapping(digest.as_ptr(), output, digest.len());
}

/// As `digest_256`: room for 64 bytes; SHA-384 fills the first 48.
///
/// # Safety
/// As `copy_512`; `output` points to 64 writable bytes.
#[cfg_attr(memprof_static_sha2, no_mangle)]
pub unsafe extern "C" fn python_hashlib_Hacl_Hash_SHA2_digest_512(
    state: *const State512,
    output: *mut u8,
) {
    let digest: Vec<u8> = match &*state {
        State512::Sha384(h) => h.clone().finalize().to_vec(),
        State512::Sha512(h) => h.clone().finalize().to_vec(),
    };
    std::ptr::copy_nonoverlapping(digest.as_ptr(), output, digest.len());
}

/// # Safety
/// As `copy_256`; the state is not used again.
#[cfg_attr(memprof_static_sha2, no_mangle)]
pub unsafe extern "C" fn python_hashlib_Hacl_Hash_SHA2_free_256(state: *mut State256) {
    drop(Box::from_raw(state));
}

/// # Safety
/// As `copy_512`; the state is not used again.
#[cfg_attr(memprof_static_sha2, no_mangle)]
pub unsafe extern "C" fn python_hashlib_Hacl_Hash_SHA2_free_512(state: *mut State512) {
    drop(Box::from_raw(state));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// FIPS 180-2's "abc" vectors, fed as "ab" + "c" through a copy taken after "ab".
    const ABC: [(&str, &str); 4] = [
        ("224", "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"),
        ("256", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("384", "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"),
        ("512", "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
    ];

    /// Feeds "ab", copies, feeds "c" to both, and checks the digests, a repeated digest after an
    /// empty update, and that the copy is independent of the original.
    macro_rules! check_family {
        ($malloc:expr, $want:expr, $n:literal, $update:ident, $copy:ident, $digest:ident, $free:ident) => {
            unsafe {
                let want: &str = $want;
                let s = $malloc();
                $update(s, b"ab".as_ptr(), 2);
                let c = $copy(s);
                $update(s, b"c".as_ptr(), 1);
                let mut out = [0u8; $n];
                $digest(s, out.as_mut_ptr());
                assert_eq!(hex(&out[..want.len() / 2]), want);
                $update(s, std::ptr::null(), 0);
                let mut same = [0u8; $n];
                $digest(s, same.as_mut_ptr());
                assert_eq!(out, same);
                $update(c, b"c".as_ptr(), 1);
                let mut copy = [0u8; $n];
                $digest(c, copy.as_mut_ptr());
                assert_eq!(hex(&copy[..want.len() / 2]), want);
                $free(s);
                $free(c);
            }
        };
    }

    #[test]
    fn each_algorithm_gives_the_standard_digest_and_keeps_its_state() {
        use self::python_hashlib_Hacl_Hash_SHA2_copy_256 as copy_256;
        use self::python_hashlib_Hacl_Hash_SHA2_copy_512 as copy_512;
        use self::python_hashlib_Hacl_Hash_SHA2_digest_256 as digest_256;
        use self::python_hashlib_Hacl_Hash_SHA2_digest_512 as digest_512;
        use self::python_hashlib_Hacl_Hash_SHA2_free_256 as free_256;
        use self::python_hashlib_Hacl_Hash_SHA2_free_512 as free_512;
        use self::python_hashlib_Hacl_Hash_SHA2_update_256 as update_256;
        use self::python_hashlib_Hacl_Hash_SHA2_update_512 as update_512;
        check_family!(
            python_hashlib_Hacl_Hash_SHA2_malloc_224,
            ABC[0].1,
            32,
            update_256,
            copy_256,
            digest_256,
            free_256
        );
        check_family!(
            python_hashlib_Hacl_Hash_SHA2_malloc_256,
            ABC[1].1,
            32,
            update_256,
            copy_256,
            digest_256,
            free_256
        );
        check_family!(
            python_hashlib_Hacl_Hash_SHA2_malloc_384,
            ABC[2].1,
            64,
            update_512,
            copy_512,
            digest_512,
            free_512
        );
        check_family!(
            python_hashlib_Hacl_Hash_SHA2_malloc_512,
            ABC[3].1,
            64,
            update_512,
            copy_512,
            digest_512,
            free_512
        );
    }
}
