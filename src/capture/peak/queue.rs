//! The allocation reporter's hand-off to the tracker: each allocation and free is queued (one
//! short lock, a write into a buffer the allocating thread keeps warm) and the tracker records
//! the queue in batches, so that its maps, the sites' tallies and the timeline stay in the
//! processor's cache through a batch instead of being fetched again for every event between the
//! program's own work (on a host-bound GPU step that was most of what the tracker cost:
//! BENCHMARKS.md, "The tracker in batches"). Whatever reads or changes the tracker records the
//! queue first (`peak::lock`), so it sees every event before it, in order.
//!
//! What the reporter must decide at an event itself, the tracker tells the queue after each
//! look (`publish`): which blocks' frees need the freeing line (those a copy of a maximum holds,
//! `needs_free_site`), and above what total an allocation may set a new maximum, after which
//! every free outside a backward pass is decided by the tracker itself, the queue recorded
//! first. Uses `int_hash`.
use super::{Block, Event, Tracker};
use crate::capture::int_hash::{IntMap, IntSet};
use std::cell::UnsafeCell;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, Ordering};

/// Events queued before the allocating thread records them: enough that a batch's first
/// events' cache misses are a small part of it, few enough (44 KiB of 88-byte events) to stay in cache.
pub const BATCH: usize = 512;

/// Events queued before the tracker's thread (worker.rs), where it runs, is woken to record
/// them: a wake costs the allocating thread a system call when the thread sleeps, so not every
/// event; few enough that a reader's own recording of the queue (`peak::lock`) stays short.
pub const WAKE_AT: usize = 128;

/// An event as queued: what the reporter knew when it happened.
#[derive(Clone, Copy, Debug, Default)]
pub struct Queued {
    pub event: Event,
    /// The tag of the compiled graph's line that allocated (0: none).
    pub tag: u32,
    /// Whether a CUDA graph's pool took the allocation (a capture or a warm-up under way).
    pub in_pool: bool,
    /// The size the program asked for and the stream (the CUDA allocator's trace entry).
    pub requested: Option<(i64, u64)>,
    /// The `--modules` forward entry running innermost on the allocating thread (+1; 0: none),
    /// read only while a trace is recorded.
    pub module: u32,
}

/// What the reporter does with an event.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer {
    /// Queued.
    Queued,
    /// Queued, and `WAKE_AT` events wait: wake the tracker's thread.
    Wake,
    /// Queued, and the queue is full: record it now.
    Full,
    /// Not queued: a free whose line may be needed; the tracker decides, the queue recorded
    /// first.
    Decide,
}

struct Queue {
    events: Vec<Queued>,
    /// The buffer the tracker gave back after recording it (empty, its room kept): the next
    /// batch's, so that no batch allocates (a 44 KiB allocation each batch made glibc
    /// consolidate its free lists) and the same memory stays in cache.
    spare: Vec<Queued>,
    /// Live blocks of no known role, not allocated by a backward pass, that a copy of a maximum
    /// holds (as of the tracker's last look): their frees need the freeing line.
    held: IntSet<u64>,
    /// A maximum is pending in the tracker, or an allocation queued since its last look may
    /// have set one: every free outside a backward pass is decided by the tracker.
    unsettled: bool,
    /// The lowest maximum an allocation can raise (i64::MAX: none).
    threshold: i64,
    /// The total at the tracker's last look, plus every allocation queued since: on the CPU,
    /// where the allocator passes no total, an upper bound of the total now.
    bound: i64,
}

/// The queue, behind a spin lock: taking it is one atomic exchange and letting it go a plain
/// store, where a mutex's release is a second locked instruction (each waits for the
/// processor's pending stores, and the reporter runs between the interpreter's). It is held for
/// a push, a swap of the buffer or the tracker's news, never across a call out.
struct Shared {
    locked: AtomicBool,
    queue: UnsafeCell<Queue>,
}

// SAFETY: `queue` is only reached through `QueueGuard`, which holds `locked`.
unsafe impl Sync for Shared {}

static QUEUE: Shared = Shared {
    locked: AtomicBool::new(false),
    queue: UnsafeCell::new(Queue {
        events: Vec::new(),
        spare: Vec::new(),
        held: IntSet::with_hasher(BuildHasherDefault::new()),
        unsettled: false,
        threshold: i64::MAX,
        bound: 0,
    }),
};

struct QueueGuard;

impl std::ops::Deref for QueueGuard {
    type Target = Queue;
    fn deref(&self) -> &Queue {
        // SAFETY: the guard holds the lock.
        unsafe { &*QUEUE.queue.get() }
    }
}

impl std::ops::DerefMut for QueueGuard {
    fn deref_mut(&mut self) -> &mut Queue {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *QUEUE.queue.get() }
    }
}

impl Drop for QueueGuard {
    fn drop(&mut self) {
        QUEUE.locked.store(false, Ordering::Release);
    }
}

fn queue() -> QueueGuard {
    let mut spins = 0u32;
    while QUEUE.locked.swap(true, Ordering::Acquire) {
        // Held for a few hundred nanoseconds at most, unless its holder was preempted.
        while QUEUE.locked.load(Ordering::Relaxed) {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
    QueueGuard
}

/// The process was just forked: no other thread runs in it, so none holds the lock (one that
/// did at the fork is gone with its thread).
pub fn forked() {
    QUEUE.locked.store(false, Ordering::Release);
}

/// Hands the reporter's event over (see `Offer`). `totals`' allocated bytes (CUDA) or the bound
/// (CPU) above the threshold mark a maximum possible.
pub fn offer(q: Queued) -> Offer {
    let mut queue = queue();
    let e = &q.event;
    if e.bytes < 0 && !e.in_backward && (queue.unsettled || queue.held.contains(&e.ptr)) {
        return Offer::Decide;
    }
    if e.bytes > 0 {
        queue.bound = queue.bound.saturating_add(e.bytes);
        let total = e.totals.map_or(queue.bound, |(allocated, _)| allocated);
        if total > queue.threshold {
            queue.unsettled = true;
        }
    }
    if queue.events.capacity() == 0 {
        queue.events.reserve_exact(BATCH);
    }
    queue.events.push(q);
    match queue.events.len() {
        n if n >= BATCH => Offer::Full,
        WAKE_AT => Offer::Wake,
        _ => Offer::Queued,
    }
}

/// How many events wait.
pub fn pending() -> usize {
    queue().events.len()
}

/// The events queued so far, in order (the tracker records them, then gives the buffer back).
pub fn take() -> Vec<Queued> {
    let mut queue = queue();
    if queue.events.is_empty() {
        return Vec::new();
    }
    // The spare buffer takes the events' place; without one, the next push reserves a buffer
    // (`offer`).
    let spare = std::mem::take(&mut queue.spare);
    std::mem::replace(&mut queue.events, spare)
}

/// A batch the tracker has recorded: kept, emptied, for the next one.
pub fn give_back(mut batch: Vec<Queued>) {
    if batch.capacity() < BATCH {
        return;
    }
    batch.clear();
    let mut queue = queue();
    if queue.spare.capacity() == 0 {
        queue.spare = batch;
    }
}

/// The tracker's state as the queue decides by it (None: no tracker; nothing is held).
pub fn publish(tracker: Option<&mut Tracker>) {
    let mut queue = queue();
    let Some(t) = tracker else {
        queue.held.clear();
        queue.unsettled = false;
        queue.threshold = i64::MAX;
        return;
    };
    t.held.tell(&mut queue.held);
    let (unsettled, threshold) = t.raisable();
    queue.unsettled = unsettled;
    queue.threshold = threshold;
    queue.bound = t.last_total;
}

/// The tracker's side of `Queue::held`: which blocks a copy of a maximum holds, told to the
/// queue as changes.
pub struct Held {
    /// Allocations outside backward passes since the latest copy, (serial, address): the
    /// blocks that the next copy holds, where still live. Bounded: past `LOG_MARGIN` more than
    /// twice the live blocks (a steady loop sets no maximum for a long while) it is dropped, and
    /// the next copy looks through every live block instead.
    recent: Vec<(u64, u64)>,
    overflowed: bool,
    /// The serial of the latest allocation when the latest copy was taken.
    pub copied_at: u64,
    /// (address, held) since the queue was last told.
    changes: Vec<(u64, bool)>,
    /// The queue's set is to be emptied first (a new tracker, a forked process, a look through
    /// every live block).
    reset: bool,
}

#[cfg(not(test))]
const LOG_MARGIN: usize = 4096;
#[cfg(test)]
const LOG_MARGIN: usize = 64;

impl Default for Held {
    fn default() -> Self {
        Held {
            recent: Vec::new(),
            overflowed: false,
            copied_at: 0,
            changes: Vec::new(),
            reset: true,
        }
    }
}

impl Held {
    /// A block was allocated outside a backward pass (`live`: the live blocks before it).
    pub fn allocated(&mut self, serial: u64, ptr: u64, live: usize) {
        if self.overflowed {
            return;
        }
        if self.recent.len() >= 2 * live + LOG_MARGIN {
            self.recent = Vec::new();
            self.overflowed = true;
            return;
        }
        self.recent.push((serial, ptr));
    }

    /// A copy of a maximum was taken at allocation `serial`: every block live now of no known
    /// role, not allocated by a backward pass, is held (those allocated since the previous copy
    /// are added).
    pub fn copied(&mut self, serial: u64, live: &IntMap<u64, Block>) {
        if std::mem::take(&mut self.overflowed) {
            self.reset = true;
            self.changes.clear();
            let all = live
                .iter()
                .filter(|(_, b)| b.fate_by_freeing_line())
                .map(|(&p, _)| (p, true));
            self.changes.extend(all);
        } else {
            for (s, p) in self.recent.drain(..) {
                if live
                    .get(&p)
                    .is_some_and(|b| b.serial == s && b.fate_by_freeing_line())
                {
                    self.changes.push((p, true));
                }
            }
        }
        self.copied_at = serial;
    }

    /// Brings `set` (the queue's) up to date with the changes since it was last told.
    pub fn tell(&mut self, set: &mut IntSet<u64>) {
        if std::mem::take(&mut self.reset) {
            set.clear();
        }
        for (ptr, holds) in self.changes.drain(..) {
            if holds {
                set.insert(ptr);
            } else {
                set.remove(&ptr);
            }
        }
    }

    /// The held block at `ptr` was freed, or took a known role.
    pub fn released(&mut self, ptr: u64) {
        self.changes.push((ptr, false));
    }

    /// Nothing is held (the copies are gone: a forked process); the next copy looks through
    /// every live block.
    pub fn restart(&mut self) {
        *self = Held {
            overflowed: true,
            ..Held::default()
        };
    }
}
