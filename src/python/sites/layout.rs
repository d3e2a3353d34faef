//! Reading the interpreter's frame chain without the GIL and without calling Python: where
//! CPython keeps a thread's innermost frame, each frame's code object, caller and current
//! instruction, and a code object's file name, qualified name and bytecode. 3.11 and 3.12: fixed
//! offsets (Include/internal/pycore_frame.h, Include/cpython/pystate.h, Include/cpython/code.h).
//! 3.13 and newer: the offsets the interpreter itself publishes for debuggers, `_Py_DebugOffsets`
//! at the start of `_PyRuntime` (what py-spy and austin read), so that a new minor version is a
//! row of `DEBUG_OFFSETS_POSITIONS`, not code. The layout is checked against the public frame API
//! once, with the GIL, before any allocation relies on it (`matches_public_api`). What it reads
//! stays valid while it reads: a thread's frames change only on that thread, which is inside the
//! allocator, and the code objects of running frames are alive.
use pyo3::ffi;
use std::os::raw::c_int;
use std::sync::OnceLock;

/// Where the fields memprof reads are, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// `PyThreadState.cframe` (3.11, 3.12) or `PyThreadState.current_frame` (3.13+).
    thread_frame: usize,
    /// `_PyCFrame.current_frame`, where the thread state points at a `_PyCFrame` (3.11, 3.12).
    cframe_current: Option<usize>,
    /// `_PyInterpreterFrame`'s code (`f_code`, `f_executable`), caller and instruction
    /// (`prev_instr` through 3.12, `instr_ptr` since 3.13: the same instruction either way, the
    /// one executing), and its owner byte (3.12+).
    frame_code: usize,
    frame_previous: usize,
    frame_instr: usize,
    frame_owner: Option<usize>,
    /// The low bits of `f_executable` that tag a `_PyStackRef` (3.14) rather than address it.
    code_tag_mask: usize,
    /// `PyCodeObject.co_filename`, `co_qualname`, `co_firstlineno` and `co_code_adaptive`.
    code_filename: usize,
    code_qualname: usize,
    code_firstlineno: usize,
    code_start: usize,
}

/// Frame owners from this value up run no code of their own: 3.12 and 3.13's
/// FRAME_OWNED_BY_CSTACK (3), 3.14's FRAME_OWNED_BY_INTERPRETER (3) and _CSTACK (4).
const FIRST_SHIM_OWNER: u8 = 3;

/// The fixed layout of 3.11 and 3.12 (None elsewhere).
fn fixed_layout() -> Option<Layout> {
    if cfg!(not(Py_3_11)) || cfg!(Py_3_13) {
        return None;
    }
    let v312 = cfg!(Py_3_12);
    Some(Layout {
        // Both versions: three pointers, then 3.11's seven ints or 3.12's status word and six ints.
        thread_frame: 56,
        // After 3.11's `use_tracing` byte (padded), first in 3.12.
        cframe_current: Some(if v312 { 0 } else { 8 }),
        frame_code: if v312 { 0 } else { 32 },
        frame_previous: if v312 { 8 } else { 48 },
        frame_instr: 56,
        frame_owner: v312.then_some(70),
        code_tag_mask: 0,
        code_filename: 112,
        code_qualname: 128,
        code_firstlineno: if v312 { 68 } else { 72 },
        // SAFETY: reading a static type object's size field; `PyCode_Type.tp_basicsize` is
        // `offsetof(PyCodeObject, co_code_adaptive)`.
        code_start: unsafe { (*std::ptr::addr_of!(ffi::PyCode_Type)).tp_basicsize as usize },
    })
}

/// Where, inside `_Py_DebugOffsets`, each minor version keeps the sections memprof reads (bytes
/// from its start): (minor, thread_state, interpreter_frame, code_object). Each section is a
/// run of u64 offsets beginning with the struct's size; their order within a section has not
/// changed since 3.13, but sections grew (3.14's interpreter state gained threads_main,
/// code_object_generation and tlbc_generation; its frame stackpointer and tlbc_index).
/// Include/internal/pycore_runtime.h (3.13), Include/internal/pycore_debug_offsets.h (3.14).
#[cfg_attr(not(Py_3_13), allow(dead_code))]
const DEBUG_OFFSETS_POSITIONS: &[(u8, usize, usize, usize)] = &[
    // cookie, version, free_threaded (24 B); runtime_state (3 x 8); interpreter_state (13 x 8);
    // thread_state (9 x 8); interpreter_frame (6 x 8).
    (13, 152, 224, 272),
    // interpreter_state 16 x 8; interpreter_frame 8 x 8.
    (14, 176, 248, 312),
];

#[cfg(Py_3_13)]
extern "C" {
    /// The runtime's state; `_Py_DebugOffsets` is its first field, "for out-of-process
    /// debuggers".
    static _PyRuntime: u8;
}

/// The layout published in `_PyRuntime.debug_offsets` (3.13+), checked for its cookie, this
/// Python's version and a build with the GIL.
#[cfg(Py_3_13)]
fn published_layout() -> Option<Layout> {
    let minor = pyo3_minor();
    let &(_, thread, frame, code) = DEBUG_OFFSETS_POSITIONS.iter().find(|(m, ..)| *m == minor)?;
    // SAFETY: `_PyRuntime` is the interpreter's static state, whose first field is the
    // `_Py_DebugOffsets` block: read-only data, at least as long as the positions above.
    unsafe {
        let base = std::ptr::addr_of!(_PyRuntime) as usize;
        let cookie: [u8; 8] = read(base, 0);
        let version: u64 = read(base, 8);
        let free_threaded: u64 = read(base, 16);
        let at = |section: usize, field: usize| read::<u64>(base, section + 8 * field) as usize;
        if &cookie != b"xdebugpy"
            || (version >> 24, (version >> 16) & 0xff) != (3, u64::from(minor))
            || free_threaded != 0
        {
            return None;
        }
        Some(Layout {
            thread_frame: at(thread, 4),
            cframe_current: None,
            frame_previous: at(frame, 1),
            frame_code: at(frame, 2),
            frame_instr: at(frame, 3),
            frame_owner: Some(at(frame, 5)),
            // 3.14's `_PyStackRef` keeps its deferred-reference tag in the low bit.
            code_tag_mask: if minor >= 14 { 0b11 } else { 0 },
            code_filename: at(code, 1),
            code_qualname: at(code, 3),
            code_firstlineno: at(code, 5),
            code_start: at(code, 9),
        })
    }
}

#[cfg(not(Py_3_13))]
fn published_layout() -> Option<Layout> {
    None
}

/// The minor version PyO3 built for.
#[cfg(Py_3_13)]
fn pyo3_minor() -> u8 {
    if cfg!(Py_3_15) {
        15
    } else if cfg!(Py_3_14) {
        14
    } else {
        13
    }
}

static LAYOUT: OnceLock<Option<Layout>> = OnceLock::new();

/// The layout of this Python, found once; None where memprof knows none.
fn layout() -> Option<&'static Layout> {
    LAYOUT
        .get_or_init(|| fixed_layout().or_else(published_layout))
        .as_ref()
}

/// The layout once `layout()` has found it, without looking for it: for the allocation path,
/// which reads frames only after `matches_public_api` did.
fn known_layout() -> Option<&'static Layout> {
    LAYOUT.get().and_then(Option::as_ref)
}

/// One frame as read: its code object and the byte offset of its last instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawFrame {
    /// The frame's own address (the same for every call made at that depth of that stack).
    pub frame: usize,
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

/// The most frames a walk follows, in case a chain is ever not what it should be.
const MOST_FRAMES: usize = 4096;
/// The frames a chain makes room for at a time (most stacks fit at once).
const CHAIN_ROOM: usize = 64;

/// The layout and the thread's innermost frame (0: it runs no Python); None where the layout is
/// not known or there is no thread state.
///
/// # Safety
/// As `walk`'s.
unsafe fn innermost(tstate: *mut ffi::PyThreadState) -> Option<(&'static Layout, usize)> {
    let l = known_layout()?;
    if tstate.is_null() {
        return None;
    }
    // SAFETY: the layout was checked; the thread state is the caller's promise.
    unsafe {
        let frame: usize = read(tstate as usize, l.thread_frame);
        Some(match l.cframe_current {
            Some(current) if frame != 0 => (l, read(frame, current)),
            _ => (l, frame),
        })
    }
}

/// Whether `frame` runs no code of its own (a C stack's entry, 3.12+).
///
/// # Safety
/// `frame` is a live frame of a thread `walk` may read.
unsafe fn is_shim(l: &Layout, frame: usize) -> bool {
    // SAFETY: the caller's promise.
    l.frame_owner
        .is_some_and(|at| unsafe { read::<u8>(frame, at) } >= FIRST_SHIM_OWNER)
}

/// The byte offset of the instruction `frame` (running `code`) executes; None for an incomplete
/// frame (set up, not started), which points before its first instruction.
///
/// # Safety
/// `frame` is a live frame of a thread `walk` may read, and `code` its code object.
unsafe fn started_at(l: &Layout, frame: usize, code: usize) -> Option<i32> {
    // SAFETY: the caller's promise.
    let instr: usize = unsafe { read(frame, l.frame_instr) };
    let start = code + l.code_start;
    (instr >= start).then(|| (instr - start) as i32)
}

/// Calls `visit` with the thread's frames, innermost first, until it returns false; none when
/// the thread runs no Python.
///
/// # Safety
/// The thread state must be the calling thread's (or one whose thread is blocked), and the
/// layout checked.
pub unsafe fn walk(tstate: *mut ffi::PyThreadState, mut visit: impl FnMut(RawFrame) -> bool) {
    // SAFETY: the caller's promise.
    let Some((l, mut frame)) = (unsafe { innermost(tstate) }) else {
        return;
    };
    // SAFETY: the layout was checked; the frames are the thread's own, alive while it waits.
    unsafe {
        let none = none_address();
        let mut left = MOST_FRAMES;
        while frame != 0 && left > 0 {
            left -= 1;
            let shim = is_shim(l, frame);
            let code = read::<usize>(frame, l.frame_code) & !l.code_tag_mask;
            if !shim && runs_code(code, none) {
                if let Some(offset) = started_at(l, frame, code) {
                    if !visit(RawFrame {
                        frame,
                        code,
                        offset,
                    }) {
                        return;
                    }
                }
            }
            frame = read(frame, l.frame_previous);
        }
    }
}

/// The thread's frames as `--history` keys a stack it has seen: each frame's instruction
/// address, innermost first, its low bit set where the frame is a C stack's shim (none is odd:
/// instructions are two-byte code units), into `chain` (cleared first); returns the chain's
/// hash. One read of each frame's instruction, caller and owner, no code object read: while no
/// code object has been created or destroyed (the code watcher's epoch), an instruction address
/// names one code object and one instruction of it, so two equal chains are two walks that
/// `walk` would visit alike, frame for frame (an unstarted frame's address lies before its
/// code's first instruction, inside that code object, where no other code's instructions are).
///
/// # Safety
/// As `walk`'s.
pub unsafe fn chain(tstate: *mut ffi::PyThreadState, chain: &mut Vec<usize>) -> u64 {
    chain.clear();
    // SAFETY: the caller's promise.
    let Some((l, mut frame)) = (unsafe { innermost(tstate) }) else {
        return 0;
    };
    // The offsets and the chain in locals: the loop then keeps them in registers rather than
    // reading the layout and the chain's length back after every write (this is the loop every
    // `--history` event runs).
    let (instr_at, previous_at, owner_at) = (l.frame_instr, l.frame_previous, l.frame_owner);
    let mut keys = std::mem::take(chain);
    keys.reserve(CHAIN_ROOM);
    let (mut at, mut room, mut to) = (0, keys.capacity(), keys.as_mut_ptr());
    let mut hash: u64 = 0;
    // SAFETY: as in `walk`; each key is written below the chain's capacity, and its length set
    // to the keys written.
    unsafe {
        let mut left = MOST_FRAMES;
        while frame != 0 && left > 0 {
            left -= 1;
            let shim = owner_at.is_some_and(|owner| read::<u8>(frame, owner) >= FIRST_SHIM_OWNER);
            let key = read::<usize>(frame, instr_at) | usize::from(shim);
            if at == room {
                keys.set_len(at);
                keys.reserve(CHAIN_ROOM);
                (room, to) = (keys.capacity(), keys.as_mut_ptr());
            }
            to.add(at).write(key);
            at += 1;
            hash = (hash.rotate_left(23) ^ key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            frame = read(frame, previous_at);
        }
        keys.set_len(at);
    }
    *chain = keys;
    hash
}

/// The address of `None`, which a frame's executable is where it runs no code.
fn none_address() -> usize {
    // SAFETY: reads the address of the interpreter's `None`, which lives as long as it does.
    unsafe { ffi::Py_None() as usize }
}

/// Whether a frame's executable (its tag taken off) is a code object: on every version memprof
/// reads, a frame's executable is a code object or, for a C stack's entry frame (3.13+), `None`
/// (CPython's `pycore_frame.h`). Told apart by address, not by reading the object's type: a
/// walk went through a dozen frames whose code objects the step had left out of the cache, one
/// miss to memory each at every allocation.
fn runs_code(code: usize, none: usize) -> bool {
    code != 0 && code != none
}

/// The fields that tell this code object from another at the same address.
///
/// # Safety
/// `code` must be a live code object, found by `walk`.
pub unsafe fn identity(code: usize) -> CodeIdentity {
    let Some(l) = known_layout() else {
        return CodeIdentity {
            filename: 0,
            qualname: 0,
            first_line: 0,
        };
    };
    // SAFETY: the caller's promise.
    unsafe {
        CodeIdentity {
            filename: read(code, l.code_filename),
            qualname: read(code, l.code_qualname),
            first_line: read(code, l.code_firstlineno),
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
    if layout().is_none() {
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
