//! Whole Python stacks for `--history`, whose events memory_viz shows with their stacks: the
//! allocating thread's frames read natively, as the site finder reads them (`layout`), each
//! distinct stack kept once by its frames' code objects and instructions and its frames named
//! when first seen, so that an event made again from a stack seen before (the next step's)
//! costs a walk, a hash and one lookup: no GIL, no Python object, no allocation. memprof's own
//! frames (its bootstrap's `<memprof ...>` code, its package's) are left out, and under the
//! wheel's `memprof run` the command's frames that run the script (the console script, the
//! launcher, runpy's below them): a plain `python` run has none.
use super::layout;
use super::Place;
use crate::capture::int_hash::{IntHasher, IntMap};
use std::cell::RefCell;
use std::hash::Hasher;
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

thread_local! {
    /// The frames of this thread's walk, reused from event to event.
    static WALKED: RefCell<Vec<FrameKey>> = const { RefCell::new(Vec::new()) };
}

/// Starts a table of stacks (a run's or an in-process session's), leaving out the frames of
/// files under `hidden` (memprof's package) besides memprof's own code, and ending each stack
/// before a frame of the `launcher`'s files (the wheel's command that runs the script).
pub fn start(hidden: Vec<String>, launcher: Vec<String>) {
    *STACKS.lock().unwrap_or_else(|e| e.into_inner()) = Some(Stacks {
        hidden,
        launcher,
        ..Stacks::default()
    });
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
    WALKED
        .try_with(|walked| {
            let mut walked = walked.borrow_mut();
            walked.clear();
            // SAFETY: the caller's promise.
            unsafe {
                layout::walk(tstate, |f| {
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
            // Bounded: a program whose stacks never repeat (recursion of every depth) looks
            // them up anew, where each stack named stays.
            if stacks.epoch != epoch || stacks.by_hash.len() > LOOKUPS {
                stacks.by_hash.clear();
                stacks.frame_ids.clear();
                stacks.epoch = epoch;
            }
            if let Some((keys, id)) = stacks.by_hash.get(&h) {
                if keys[..] == walked[..] {
                    return *id;
                }
            }
            // A stack not seen before: its frames named.
            let mut frames = Vec::with_capacity(walked.len());
            for &key in walked.iter() {
                match stacks.frame(key) {
                    Named::Shown(i) => frames.push(i),
                    Named::Hidden => {}
                    Named::Launcher => break,
                }
            }
            stacks.stacks.push(frames);
            let id = stacks.stacks.len() as u32;
            stacks.by_hash.entry(h).or_insert((walked.clone(), id));
            id
        })
        .unwrap_or(0)
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
