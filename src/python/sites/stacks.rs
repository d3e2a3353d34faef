//! Whole Python stacks for `--history`, whose events memory_viz shows with their stacks: the
//! allocating thread's frames read natively, as the site finder reads them (`layout`), each
//! distinct stack kept once by its frames' code objects and instructions and its frames named
//! when first seen, so that an event made again from a stack seen before (the next step's)
//! costs a walk, a hash and one lookup: no GIL, no Python object, no allocation; and a stack
//! this thread has seen (`Known`: the same line's in the next step, each of a block's layers)
//! costs one read of each frame's instruction and a comparison, in a table of the thread's own,
//! with no lock. memprof's own frames (its bootstrap's `<memprof ...>` code, its package's) are
//! left out, and under the wheel's `memprof run` the command's frames that run the script (the
//! console script, the launcher, runpy's below them): a plain `python` run has none.
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

/// Advanced by every new table of stacks (`start`): a thread's known stacks name ids of the
/// table they were looked up in.
static TABLE: AtomicU64 = AtomicU64::new(0);

/// A stack this thread looked up: its chain (`layout::chain`: each frame's instruction,
/// innermost first) and id, valid in the table and the code watcher's epoch it was looked up
/// in.
#[derive(Default)]
struct Known {
    hash: u64,
    table: u64,
    epoch: u64,
    id: u32,
    chain: Vec<usize>,
}

/// Stacks known per thread, two to a hash's pair of slots: a step's distinct allocating
/// stacks (resnet50's, about a hundred; a bottleneck block's three convolutions differ only in
/// an outer frame, which a table keyed by the innermost frame alone made miss in turn).
const KNOWN: usize = 1024;

/// What a thread keeps from event to event.
struct Thread {
    /// The chain of the walk under way.
    chain: Vec<usize>,
    /// The frames of a full walk (`looked_up`).
    walked: Vec<FrameKey>,
    known: Vec<Known>,
}

thread_local! {
    static THREAD: RefCell<Thread> = const {
        RefCell::new(Thread {
            chain: Vec::new(),
            walked: Vec::new(),
            known: Vec::new(),
        })
    };
}

/// The first of the pair of slots a chain's hash keeps it in (the other: this one's neighbour).
fn known_slot(hash: u64) -> usize {
    (hash >> (u64::BITS - KNOWN.trailing_zeros())) as usize & !1
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
    THREAD
        .try_with(|thread| {
            // Never borrowed twice (nothing below allocates through torch's allocator), but a
            // panic has no place on the allocator's path: a second borrow reads no stack.
            let Ok(mut thread) = thread.try_borrow_mut() else {
                return 0;
            };
            let Some(epoch) = epoch else {
                // Without the code watcher (3.11) an instruction's address may be another code
                // object's since: every stack is looked up by its frames.
                // SAFETY: the caller's promise.
                return unsafe { looked_up(tstate, None, &mut thread.walked) };
            };
            // SAFETY: the caller's promise.
            unsafe { known(tstate, epoch, &mut thread) }
        })
        .unwrap_or(0)
}

/// The thread's stack from its table of known stacks, looked up (and kept there) where it is
/// not in it.
///
/// # Safety
/// As `stack_here`'s.
unsafe fn known(tstate: *mut pyo3::ffi::PyThreadState, epoch: u64, thread: &mut Thread) -> u32 {
    let Thread {
        chain,
        walked,
        known,
    } = thread;
    // SAFETY: the caller's promise.
    let hash = unsafe { layout::chain(tstate, chain) };
    if chain.is_empty() {
        return 0;
    }
    let table = TABLE.load(Ordering::Acquire);
    if known.is_empty() {
        known.resize_with(KNOWN, Known::default);
    }
    let first = known_slot(hash);
    let same = |k: &Known| {
        k.hash == hash && k.table == table && k.epoch == epoch && k.id != 0 && k.chain == *chain
    };
    for slot in [first, first + 1] {
        if same(&known[slot]) {
            return known[slot].id;
        }
    }
    // SAFETY: the caller's promise.
    let id = unsafe { looked_up(tstate, Some(epoch), walked) };
    if id != 0 {
        // The newest in the pair's first slot, the one it displaces in the second.
        known.swap(first, first + 1);
        let k = &mut known[first];
        k.hash = hash;
        k.table = table;
        k.epoch = epoch;
        k.id = id;
        k.chain.clone_from(chain);
    }
    id
}

/// The thread's stack looked up in the table by its frames (named there if new).
///
/// # Safety
/// As `stack_here`'s.
unsafe fn looked_up(
    tstate: *mut pyo3::ffi::PyThreadState,
    epoch: Option<u64>,
    walked: &mut Vec<FrameKey>,
) -> u32 {
    walked.clear();
    // SAFETY: the caller's promise.
    unsafe {
        layout::walk(tstate, |f| {
            // With the code watcher (3.12+) an address names one code object for the whole
            // epoch: the code object's fields need not be read.
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
    let h = hash(walked);
    let mut guard = STACKS.lock().unwrap_or_else(|e| e.into_inner());
    let Some(stacks) = guard.as_mut() else {
        return 0;
    };
    stacks.id_of(walked, h, epoch)
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
