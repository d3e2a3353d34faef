//! The chains of frames that each thread's site walks went through, so that an allocation made
//! again from the same stack (the same layer's op in the next step, the next op of a layer) finds
//! its site by comparing frame and code addresses alone, without classifying every frame's code
//! again: the full walk reads each code object and looks it up in the site table, cache misses
//! that cost a GPU-bound training step more than the walk itself.
//!
//! A chain is valid while no code object has been created or destroyed since it was noted (a
//! code watcher counts those, Python 3.12+: only then can an address that a frame runs stand for
//! another code object) and the site table is the same one (`invalidate`). Chains through a
//! compiled graph's frames, whose sites depend on the line, and walks that found no context are
//! not noted.
use super::layout::RawFrame;
use crate::python::c_api::python_function;
use std::cell::RefCell;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// Advanced by every code object created or destroyed, every new site table and every compiled
/// graph's line map (which changes how its file's frames are read).
static EPOCH: AtomicU64 = AtomicU64::new(1);
/// The code watcher's id (-1: none). Without a watcher a chain cannot be trusted, and none is
/// noted.
static WATCHER: AtomicI32 = AtomicI32::new(-1);
/// Chains kept per thread, by their innermost frame.
const SLOTS: usize = 64;

/// Every chain noted so far is stale.
pub fn invalidate() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

extern "C" fn on_code_event(_event: c_int, _code: *mut c_void) -> c_int {
    invalidate();
    0
}

/// Watches code objects' creation and destruction (once per session; the GIL held):
/// `PyCode_AddWatcher`, Python 3.12+; on 3.11, or when the interpreter's watcher slots are
/// taken, every walk is a full one.
pub fn watch_code_objects() {
    if WATCHER.load(Ordering::Acquire) >= 0 {
        return;
    }
    let Some(found) = python_function(c"PyCode_AddWatcher") else {
        return;
    };
    type Callback = extern "C" fn(c_int, *mut c_void) -> c_int;
    type AddWatcher = unsafe extern "C" fn(Callback) -> c_int;
    // SAFETY: PyCode_AddWatcher has this signature where it exists, and is called with the GIL
    // held, as it requires.
    unsafe {
        let add = std::mem::transmute::<*mut c_void, AddWatcher>(found);
        let id = add(on_code_event);
        if id >= 0 {
            WATCHER.store(id, Ordering::Release);
        } else {
            pyo3::ffi::PyErr_Clear();
        }
    }
}

/// Takes the watcher off (an in-process session's end: nothing of memprof stays in the
/// program); the chains noted are forgotten. The GIL held.
pub fn unwatch_code_objects() {
    let id = WATCHER.swap(-1, Ordering::AcqRel);
    if id < 0 {
        return;
    }
    invalidate();
    // PyCode_ClearWatcher exists where PyCode_AddWatcher gave `id`.
    let Some(found) = python_function(c"PyCode_ClearWatcher") else {
        return;
    };
    type ClearWatcher = unsafe extern "C" fn(c_int) -> c_int;
    // SAFETY: its signature; called with the GIL held.
    unsafe {
        let clear = std::mem::transmute::<*mut c_void, ClearWatcher>(found);
        if clear(id) < 0 {
            pyo3::ffi::PyErr_Clear();
        }
    }
}

/// The epoch a walk starting now belongs to (None: no chain is trusted).
pub fn epoch() -> Option<u64> {
    (WATCHER.load(Ordering::Acquire) >= 0).then(|| EPOCH.load(Ordering::Acquire))
}

/// A walk's outcome, to be noted: the frames it went through up to its context, innermost
/// first, and what the site table made of them.
#[derive(Clone, Debug, Default)]
pub struct Chain {
    epoch: u64,
    /// (frame address, code address) of each frame walked, the context's last.
    pub frames: Vec<(usize, usize)>,
    /// The site's index in `frames`.
    pub site: usize,
    pub site_generation: u32,
    pub context_generation: u32,
    pub in_module: bool,
    /// The sites the table named for this chain's instructions lately: (site frame's offset,
    /// context frame's offset, site id, tag); a site id of 0 is an empty entry. An allocation
    /// made again at one of them needs no look into the table (nor its lock).
    named: [(i32, i32, u32, u32); NAMED],
    next_named: usize,
}

/// Instructions remembered per chain: a layer's chain serves the lines of its caller that call it
/// (a bottleneck block's three convolutions and its downsampling).
const NAMED: usize = 8;

/// What a chain found again gives: the instructions of its site and context frames now, with
/// their codes' generations (the site table's cache key), and whether a module call is on it.
pub struct Replayed {
    pub site: (u32, i32),
    pub context: (u32, i32),
    pub in_module: bool,
    /// The site id and tag the table named these instructions, where the chain remembers them.
    pub named: Option<(u32, u32)>,
    /// The chain's slot, to `remember` the table's answer in.
    pub slot: usize,
}

thread_local! {
    static CHAINS: RefCell<Vec<Chain>> = const { RefCell::new(Vec::new()) };
}

fn slot(frame: RawFrame) -> usize {
    (frame.frame ^ frame.code.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58
}

/// What the thread's frames say against the chains noted.
pub enum Replay {
    /// The thread runs no Python now (autograd's device threads): it has no site.
    NoFrames,
    /// No chain noted goes the way the frames go now: a full walk is needed.
    Missed,
    Found(Replayed),
}

/// The noted chain that the thread's frames (`walk` gives them, innermost first) follow now, if
/// one does.
pub fn replay(epoch: u64, walk: impl FnOnce(&mut dyn FnMut(RawFrame) -> bool)) -> Replay {
    // `try_with`: a thread's last frees may come while its thread-locals are being destroyed
    // (a full walk then, and nothing noted).
    CHAINS
        .try_with(|chains| {
            let chains = chains.borrow();
            let mut chain: Option<&Chain> = None;
            let mut slot_of_chain = 0;
            let mut at = 0;
            let (mut site, mut context) = (0, 0);
            let (mut any, mut whole) = (false, false);
            walk(&mut |f| {
                any = true;
                let c = match chain {
                    Some(c) => c,
                    None => {
                        slot_of_chain = slot(f);
                        match chains.get(slot_of_chain) {
                            Some(c) if c.epoch == epoch && !c.frames.is_empty() => {
                                chain = Some(c);
                                c
                            }
                            _ => return false,
                        }
                    }
                };
                if c.frames[at] != (f.frame, f.code) {
                    return false;
                }
                if at == c.site {
                    site = f.offset;
                }
                at += 1;
                if at == c.frames.len() {
                    context = f.offset;
                    whole = true;
                    return false;
                }
                true
            });
            match chain.filter(|_| whole) {
                Some(c) => Replay::Found(Replayed {
                    site: (c.site_generation, site),
                    context: (c.context_generation, context),
                    in_module: c.in_module,
                    named: c
                        .named
                        .iter()
                        .find(|n| n.2 != 0 && n.0 == site && n.1 == context)
                        .map(|n| (n.2, n.3)),
                    slot: slot_of_chain,
                }),
                None if !any => Replay::NoFrames,
                None => Replay::Missed,
            }
        })
        .unwrap_or(Replay::Missed)
}

/// The table named the instructions `r` replayed to (noted in `epoch`) as `site` with `tag`:
/// the chain remembers it, if it is still the one in its slot.
pub fn remember(epoch: u64, r: &Replayed, site: u32, tag: u32) {
    let _ = CHAINS.try_with(|chains| {
        let mut chains = chains.borrow_mut();
        let Some(c) = chains.get_mut(r.slot) else {
            return;
        };
        if c.epoch != epoch || site == 0 {
            return;
        }
        let i = c.next_named;
        c.named[i] = (r.site.1, r.context.1, site, tag);
        c.next_named = (i + 1) % NAMED;
    });
}

/// Notes a full walk's chain (made in `epoch`), in the slot of its innermost frame.
pub fn note(epoch: u64, mut chain: Chain) {
    let Some(&(frame, code)) = chain.frames.first() else {
        return;
    };
    chain.epoch = epoch;
    let i = slot(RawFrame {
        frame,
        code,
        offset: 0,
    });
    let _ = CHAINS.try_with(|chains| {
        let mut chains = chains.borrow_mut();
        if chains.len() < SLOTS {
            chains.resize(SLOTS, Chain::default());
        }
        chains[i] = chain;
    });
}
