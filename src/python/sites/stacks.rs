//! Whole Python stacks for `--history`, whose events memory_viz shows with their stacks: the
//! allocating thread's frames read natively, as the site finder reads them (`layout`), each
//! distinct stack kept once by its frames' code objects and instructions and its frames named
//! when first seen, so that an event made again from a stack seen before (the next step's)
//! costs a walk, a hash and one lookup: no GIL, no Python object, no allocation; and a stack
//! this thread made lately (`Recent`: the same line's in the next step) costs only the walk,
//! matched frame by frame as it goes, with no hash, lock or table. memprof's own
//! frames (its bootstrap's `<memprof ...>` code, its package's) are left out, and under the
//! wheel's `memprof run` the command's frames that run the script (the console script, the
//! launcher, runpy's below them): a plain `python` run has none.
use super::layout;
use super::Place;
use crate::capture::int_hash::{IntHasher, IntMap};
use std::cell::RefCell;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What tells a frame from another: its code object's address and, without the code watcher, the
/// file and qualified-name objects it holds (a successor at the same address holds others;
/// with the watcher, 0 and 0), and its instruction.
type FrameKey = (usize, usize, usize, i32);

#[derive(Default)]
struct Stacks {
    /// The code watcher's epoch the lookups below were made in: a code object created or
    /// destroyed since may stand at an address they name, so they are dropped (the stacks
    /// named so far stay).
    epoch: Option<u64>,
    /// A stack's hash -> its keys (innermost first) and id.
    by_hash: IntMap<u64, (Vec<FrameKey>, u32)>,
    /// A frame's key -> what it is.
    frame_ids: IntMap<FrameKey, Named>,
    /// Stack id - 1 -> its frames, innermost first (indices into `frames`).
    stacks: Vec<Vec<u32>>,
    frames: Vec<Place>,
    /// Where memprof's own frames are (its package).
    hidden: Vec<String>,
    /// The files of the command that runs the script: their frames and those outside them are
    /// the command's.
    launcher: Vec<String>,
}

/// What a frame is to a stack.
#[derive(Clone, Copy)]
enum Named {
    /// One of the program's: its index in `frames`.
    Shown(u32),
    /// memprof's own, left out.
    Hidden,
    /// The command's that runs the script: the stack ends before it.
    Launcher,
}

static STACKS: Mutex<Option<Stacks>> = Mutex::new(None);
/// How many stacks are looked up by their frames before the lookups start again.
const LOOKUPS: usize = 1 << 16;

/// Advanced by every new table of stacks (`start`): a thread's recent stacks name ids of the
/// table they were looked up in.
static TABLE: AtomicU64 = AtomicU64::new(0);

/// A stack this thread looked up lately, kept in the slot of its innermost frame: its frames'
/// code objects and instructions (innermost first) and its id, valid in the table and the code
/// watcher's epoch it was looked up in.
#[derive(Default)]
struct Recent {
    table: u64,
    epoch: u64,
    frames: Vec<(usize, i32)>,
    id: u32,
}

/// Recent stacks kept per thread (a step's distinct allocating lines, most of them).
const RECENT: usize = 256;

thread_local! {
    /// The frames of this thread's walk, reused from event to event.
    static WALKED: RefCell<Vec<FrameKey>> = const { RefCell::new(Vec::new()) };
    static RECENT_STACKS: RefCell<Vec<Recent>> = const { RefCell::new(Vec::new()) };
}

/// The slot of a stack whose innermost frame is at `frame`, running `code` at `offset`.
fn recent_slot(frame: usize, code: usize, offset: i32) -> usize {
    let h = (frame ^ code.rotate_left(21) ^ (offset as usize).rotate_left(42))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h >> (usize::BITS - RECENT.trailing_zeros())
}

/// Starts a table of stacks (a run's or an in-process session's), leaving out the frames of
/// files under `hidden` (memprof's package) besides memprof's own code, and ending each stack
/// before a frame of the `launcher`'s files (the wheel's command that runs the script).
pub fn start(hidden: Vec<String>, launcher: Vec<String>) {
    let mut stacks = STACKS.lock().unwrap_or_else(|e| e.into_inner());
    *stacks = Some(Stacks {
        hidden,
        launcher,
        ..Stacks::default()
    });
    TABLE.fetch_add(1, Ordering::AcqRel);
}

fn hash(keys: &[FrameKey]) -> u64 {
    let mut h = IntHasher::default();
    for &(code, file, name, offset) in keys {
        h.write_usize(code);
        h.write_usize(file ^ name.rotate_left(32));
        h.write_u32(offset as u32);
    }
    h.finish()
}

impl Stacks {
    /// What the frame `key` names.
    fn frame(&mut self, key: FrameKey) -> Named {
        if let Some(&id) = self.frame_ids.get(&key) {
            return id;
        }
        let (code, mut filename, mut qualname, offset) = key;
        // SAFETY: the frame's code object, and the strings it holds, are alive while its thread
        // is in the allocator.
        let place = unsafe {
            if filename == 0 {
                let id = layout::identity(code);
                (filename, qualname) = (id.filename, id.qualname);
            }
            Place {
                file: layout::text_of(filename),
                line: layout::line_of(code, offset).unwrap_or(0),
                function: layout::text_of(qualname),
            }
        };
        let under = |dirs: &[String]| dirs.iter().any(|d| place.file.starts_with(d.as_str()));
        let named = if under(&self.launcher) {
            Named::Launcher
        } else if place.file.starts_with("<memprof") || under(&self.hidden) {
            Named::Hidden
        } else {
            self.frames.push(place);
            Named::Shown(self.frames.len() as u32 - 1)
        };
        self.frame_ids.insert(key, named);
        named
    }
}

/// The calling thread's whole stack, as an id (0: it runs no Python, or stacks are not kept).
///
/// # Safety
/// `tstate` must be the calling thread's state, the layout checked (`layout::walk`'s promise).
pub(super) unsafe fn stack_here(tstate: *mut pyo3::ffi::PyThreadState, epoch: Option<u64>) -> u32 {
    if let Some(epoch) = epoch {
        // SAFETY: the caller's promise.
        if let Some(id) = unsafe { recent(tstate, epoch) } {
            return id;
        }
    }
    // SAFETY: the caller's promise.
    unsafe { looked_up(tstate, epoch) }
}

/// The thread's stack, if it is the one this thread made last from the same innermost frame:
/// compared with it frame by frame as the walk goes, stopping at the first that differs.
///
/// # Safety
/// As `stack_here`'s.
unsafe fn recent(tstate: *mut pyo3::ffi::PyThreadState, epoch: u64) -> Option<u32> {
    let table = TABLE.load(Ordering::Acquire);
    let mut innermost = None;
    // SAFETY: the caller's promise.
    unsafe {
        layout::walk(tstate, |f| {
            innermost = Some(f);
            false
        })
    };
    let f = innermost?;
    RECENT_STACKS
        .try_with(|recent| {
            let recent = recent.borrow();
            let e = recent.get(recent_slot(f.frame, f.code, f.offset))?;
            // SAFETY: the caller's promise; the entry's code objects were found by a walk in
            // `epoch`, still the watcher's.
            (e.table == table
                && e.epoch == epoch
                && e.id != 0
                && unsafe { layout::walk_same(tstate, &e.frames) })
            .then_some(e.id)
        })
        .ok()
        .flatten()
}

/// The thread's stack looked up in the table by its frames (named there if new), and kept as
/// this thread's recent one from its innermost frame.
///
/// # Safety
/// As `stack_here`'s.
unsafe fn looked_up(tstate: *mut pyo3::ffi::PyThreadState, epoch: Option<u64>) -> u32 {
    WALKED
        .try_with(|walked| {
            let mut walked = walked.borrow_mut();
            walked.clear();
            let mut innermost = 0;
            // SAFETY: the caller's promise.
            unsafe {
                layout::walk(tstate, |f| {
                    if walked.is_empty() {
                        innermost = f.frame;
                    }
                    // With the code watcher (3.12+) an address names one code object for the
                    // whole epoch: the code object's fields need not be read.
                    let (file, name) = if epoch.is_some() {
                        (0, 0)
                    } else {
                        let id = layout::identity(f.code);
                        (id.filename, id.qualname)
                    };
                    walked.push((f.code, file, name, f.offset));
                    true
                })
            };
            if walked.is_empty() {
                return 0;
            }
            let h = hash(&walked);
            let mut guard = STACKS.lock().unwrap_or_else(|e| e.into_inner());
            let Some(stacks) = guard.as_mut() else {
                return 0;
            };
            let table = TABLE.load(Ordering::Acquire);
            let id = stacks.id_of(&walked, h, epoch);
            drop(guard);
            if let Some(epoch) = epoch {
                remember(innermost, table, epoch, &walked, id);
            }
            id
        })
        .unwrap_or(0)
}

/// Keeps `walked`'s id as the thread's recent stack from its innermost frame (at `frame`).
fn remember(frame: usize, table: u64, epoch: u64, walked: &[FrameKey], id: u32) {
    let (code, _, _, offset) = walked[0];
    let _ = RECENT_STACKS.try_with(|recent| {
        let mut recent = recent.borrow_mut();
        if recent.len() < RECENT {
            recent.resize_with(RECENT, Recent::default);
        }
        let slot = &mut recent[recent_slot(frame, code, offset)];
        slot.table = table;
        slot.epoch = epoch;
        slot.id = id;
        slot.frames.clear();
        slot.frames
            .extend(walked.iter().map(|&(code, _, _, offset)| (code, offset)));
    });
}

impl Stacks {
    /// The id of the stack whose frames are `walked` (hash `h`), named if new.
    fn id_of(&mut self, walked: &[FrameKey], h: u64, epoch: Option<u64>) -> u32 {
        // Bounded: a program whose stacks never repeat (recursion of every depth) looks them up
        // anew, where each stack named stays.
        if self.epoch != epoch || self.by_hash.len() > LOOKUPS {
            self.by_hash.clear();
            self.frame_ids.clear();
            self.epoch = epoch;
        }
        if let Some((keys, id)) = self.by_hash.get(&h) {
            if keys[..] == walked[..] {
                return *id;
            }
        }
        // A stack not seen before: its frames named.
        let mut frames = Vec::with_capacity(walked.len());
        for &key in walked.iter() {
            match self.frame(key) {
                Named::Shown(i) => frames.push(i),
                Named::Hidden => {}
                Named::Launcher => break,
            }
        }
        self.stacks.push(frames);
        let id = self.stacks.len() as u32;
        self.by_hash.entry(h).or_insert((walked.to_vec(), id));
        id
    }
}

/// Every stack so far by id (id 1 first): its frames innermost first.
pub fn all() -> Vec<Vec<Place>> {
    STACKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|s| {
            s.stacks
                .iter()
                .map(|frames| {
                    frames
                        .iter()
                        .map(|&i| s.frames[i as usize].clone())
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}
