//! Reading the interpreter's frame chain without the GIL and without calling Python: where
//! CPython 3.11 and 3.12 keep a thread's innermost frame, each frame's code object, caller and
//! last instruction, and a code object's file name, qualified name and bytecode
//! (Include/internal/pycore_frame.h, Include/cpython/pystate.h, Include/cpython/code.h). The
//! layout is checked against the public frame API once, with the GIL, before any allocation
//! relies on it (`matches_public_api`). What it reads stays valid while it reads: a thread's
//! frames change only on that thread, which is inside the allocator, and the code objects of
//! running frames are alive.
use pyo3::ffi;
use std::os::raw::c_int;

/// The versions whose layout this file knows: on any other the frames are never read (every
/// site is unknown, and the bootstrap says so).
const KNOWN_LAYOUT: bool = cfg!(all(Py_3_11, not(Py_3_13)));

/// `PyThreadState.cframe` (both versions: three pointers, then 3.11's seven ints or 3.12's
/// status word and six ints).
const THREAD_CFRAME: usize = 56;
/// `_PyCFrame.current_frame`: after 3.11's `use_tracing` byte (padded), first in 3.12.
#[cfg(not(Py_3_12))]
const CFRAME_CURRENT: usize = 8;
#[cfg(Py_3_12)]
const CFRAME_CURRENT: usize = 0;
/// `_PyInterpreterFrame`: f_code, previous, prev_instr and owner.
#[cfg(not(Py_3_12))]
const FRAME_CODE: usize = 32;
#[cfg(Py_3_12)]
const FRAME_CODE: usize = 0;
#[cfg(not(Py_3_12))]
const FRAME_PREVIOUS: usize = 48;
#[cfg(Py_3_12)]
const FRAME_PREVIOUS: usize = 8;
const FRAME_PREV_INSTR: usize = 56;
#[cfg(Py_3_12)]
const FRAME_OWNER: usize = 70;
/// 3.12's FRAME_OWNED_BY_CSTACK: the entry shim of a C-to-Python call, no code of its own.
#[cfg(Py_3_12)]
const OWNED_BY_CSTACK: u8 = 3;
/// `PyCodeObject.co_filename`, `co_qualname` and `co_firstlineno`.
const CODE_FILENAME: usize = 112;
const CODE_QUALNAME: usize = 128;
#[cfg(not(Py_3_12))]
const CODE_FIRSTLINENO: usize = 72;
#[cfg(Py_3_12)]
const CODE_FIRSTLINENO: usize = 68;

/// One frame as read: its code object and the byte offset of its last instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawFrame {
    pub code: usize,
    pub offset: i32,
}

/// What identifies a code object beyond its address, which a freed one's successor may reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeIdentity {
    pub filename: usize,
    pub qualname: usize,
    pub first_line: i32,
}

/// # Safety
/// `base + offset` must be readable as a `T`.
unsafe fn read<T: Copy>(base: usize, offset: usize) -> T {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::read((base + offset) as *const T) }
}

/// Calls `visit` with the thread's frames, innermost first, until it returns false; none when
/// the thread runs no Python.
///
/// # Safety
/// The thread state must be the calling thread's (or one whose thread is blocked), and the
/// layout checked.
pub unsafe fn walk(tstate: *mut ffi::PyThreadState, mut visit: impl FnMut(RawFrame) -> bool) {
    if !KNOWN_LAYOUT || tstate.is_null() {
        return;
    }
    // SAFETY: the layout was checked; the frames are the thread's own, alive while it waits.
    unsafe {
        let cframe: usize = read(tstate as usize, THREAD_CFRAME);
        if cframe == 0 {
            return;
        }
        let mut frame: usize = read(cframe, CFRAME_CURRENT);
        // A bound, in case a chain is ever not what it should be.
        let mut left = 4096;
        while frame != 0 && left > 0 {
            left -= 1;
            if !owned_by_cstack(frame) {
                let code: usize = read(frame, FRAME_CODE);
                let instr: usize = read(frame, FRAME_PREV_INSTR);
                let start = code + code_start();
                // An incomplete frame (set up, not started) points before its first instruction.
                if code != 0
                    && instr >= start
                    && !visit(RawFrame {
                        code,
                        offset: (instr - start) as i32,
                    })
                {
                    return;
                }
            }
            frame = read(frame, FRAME_PREVIOUS);
        }
    }
}

#[cfg(Py_3_12)]
unsafe fn owned_by_cstack(frame: usize) -> bool {
    // SAFETY: a frame of the chain.
    unsafe { read::<u8>(frame, FRAME_OWNER) == OWNED_BY_CSTACK }
}

#[cfg(not(Py_3_12))]
unsafe fn owned_by_cstack(_: usize) -> bool {
    false
}

/// Where a code object's bytecode starts: `PyCode_Type.tp_basicsize` is
/// `offsetof(PyCodeObject, co_code_adaptive)`.
fn code_start() -> usize {
    static START: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: reading a static type object's size field.
    *START.get_or_init(|| unsafe { (*std::ptr::addr_of!(ffi::PyCode_Type)).tp_basicsize as usize })
}

/// The fields that tell this code object from another at the same address.
///
/// # Safety
/// `code` must be a live code object.
pub unsafe fn identity(code: usize) -> CodeIdentity {
    // SAFETY: the caller's promise.
    unsafe {
        CodeIdentity {
            filename: read(code, CODE_FILENAME),
            qualname: read(code, CODE_QUALNAME),
            first_line: read(code, CODE_FIRSTLINENO),
        }
    }
}

/// The source line of the instruction at `offset`, or None when out of the code's range.
///
/// # Safety
/// `code` must be a live code object.
pub unsafe fn line_of(code: usize, offset: i32) -> Option<u32> {
    // SAFETY: the caller's promise; `ob_size` is the bytecode's length in 2-byte units, and
    // PyCode_Addr2Line only reads the code's line table.
    unsafe {
        let units = (*(code as *mut ffi::PyVarObject)).ob_size;
        if offset < 0 || offset as isize >= units * 2 {
            return None;
        }
        let line = ffi::PyCode_Addr2Line(code as *mut ffi::PyCodeObject, offset as c_int);
        u32::try_from(line).ok()
    }
}

/// A str object's text, read without the GIL (its characters never change).
///
/// # Safety
/// `s` must be a live str object.
pub unsafe fn text_of(s: usize) -> String {
    let op = s as *mut ffi::PyObject;
    // SAFETY: the caller's promise; a ready str's kind, length and data.
    unsafe {
        if s == 0 || ffi::PyUnicode_Check(op) == 0 {
            return String::new();
        }
        let len = ffi::PyUnicode_GET_LENGTH(op) as usize;
        let data = ffi::PyUnicode_DATA(op);
        let kind = ffi::PyUnicode_KIND(op);
        (0..len)
            .map(|i| {
                let c = match kind {
                    ffi::PyUnicode_1BYTE_KIND => u32::from(*(data as *const u8).add(i)),
                    ffi::PyUnicode_2BYTE_KIND => u32::from(*(data as *const u16).add(i)),
                    _ => *(data as *const u32).add(i),
                };
                char::from_u32(c).unwrap_or('\u{fffd}')
            })
            .collect()
    }
}

/// Whether the native reading agrees with the public frame API on the calling thread (GIL held):
/// the same code objects and lines, innermost first.
pub fn matches_public_api(_py: pyo3::Python<'_>) -> bool {
    if !KNOWN_LAYOUT {
        return false;
    }
    let mut raw = Vec::new();
    // SAFETY: this thread's own state, GIL held; the public API below checks the result.
    unsafe {
        let tstate = ffi::PyThreadState_Get();
        walk(tstate, |f| {
            raw.push(f);
            raw.len() < 64
        });
        let n = raw.len();
        let mut frame = ffi::PyThreadState_GetFrame(tstate);
        let mut i = 0;
        let mut same = n > 0;
        while !frame.is_null() && i < n {
            let code = ffi::PyFrame_GetCode(frame);
            let line = ffi::PyFrame_GetLineNumber(frame);
            let native_line = line_of(raw[i].code, raw[i].offset);
            let id = identity(code as usize);
            let name =
                ffi::PyObject_GetAttrString(code as *mut ffi::PyObject, c"co_filename".as_ptr());
            same &= code as usize == raw[i].code
                && native_line == u32::try_from(line).ok()
                && name as usize == id.filename;
            ffi::Py_XDECREF(name);
            ffi::Py_DECREF(code as *mut ffi::PyObject);
            let back = ffi::PyFrame_GetBack(frame);
            ffi::Py_DECREF(frame as *mut ffi::PyObject);
            frame = back;
            i += 1;
        }
        ffi::Py_XDECREF(frame as *mut ffi::PyObject);
        if ffi::PyErr_Occurred().is_null() {
            same && i == n
        } else {
            ffi::PyErr_Clear();
            false
        }
    }
}
