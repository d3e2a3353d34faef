//! `--history`'s own record of the allocator's events: on the CPU, where libtorch keeps no
//! history, from the allocator's reports; on CUDA, from the caching allocator's trace entries
//! (src/torch/cpp/cuda_trace.cpp), so that memprof never switches torch's own history (a
//! program's `_record_memory_history` stays the program's) nor pays for its stack capture. A
//! ring of the latest N, each event with the targeted line running, the module call running
//! (`--modules`) and, while a targeted line runs, the thread's whole Python stack (found by
//! the stack reader `python::sites` registers). Recorded inside the allocator, on the
//! allocating thread (its lock held, on CUDA): no Python, no panic.
mod clock;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// What happened, as torch's trace entries name it (numbered as src/torch/cpp/cuda_trace.cpp
/// hands them over). The CPU's record has `Alloc` and `FreeCompleted` only.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
}

impl Action {
    const ALL: [Action; 8] = [
        Action::Alloc,
        Action::FreeRequested,
        Action::FreeCompleted,
        Action::SegmentAlloc,
        Action::SegmentFree,
        Action::SegmentMap,
        Action::SegmentUnmap,
        Action::Oom,
    ];

    /// The shim's number for it.
    pub fn of(code: i32) -> Option<Action> {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::ALL.get(i))
            .copied()
    }

    /// Its name in torch's snapshots (`device_traces` entries' `action`).
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Oom => "oom",
        }
    }
}

/// One event of the allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub action: Action,
    /// The CUDA device (-1: the CPU).
    pub device: i32,
    /// The block's or segment's address (for `Oom`, the device's free bytes, as torch has it).
    pub ptr: u64,
    /// Bytes (for CUDA allocations, the size requested).
    pub size: i64,
    pub stream: u64,
    /// µs since the epoch (in the ring, until the record stops: the clock's ticks,
    /// `clock::ticks`).
    pub time_us: i64,
    /// The targeted line running then (`torch::tags::encode`; 0: none).
    pub tag: u64,
    /// The thread's whole stack (`python::sites::stacks`; 0: none read).
    pub stack: u32,
    /// The module call running then, under `--modules` (an id of `labels`; 0: none).
    pub label: u32,
}

#[derive(Default)]
struct Ring {
    /// Its room is kept from record to record, written once when it is made (see `start`).
    events: Vec<Event>,
    max: usize,
    /// Where the next event goes once the ring is full.
    next: usize,
    dropped: u64,
    /// Both clocks when the record started: the events' ticks become times from it.
    started_at: Option<clock::Anchor>,
}

static ON: AtomicBool = AtomicBool::new(false);
/// Whether this record ever started, and whether CUDA's could not (no caching allocator to
/// trace: another allocator backend).
static STARTED: AtomicBool = AtomicBool::new(false);
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);
/// The module call running now (an id of `LABELS`; 0: none).
static LABEL: AtomicU32 = AtomicU32::new(0);
static LABELS: Mutex<Labels> = Mutex::new(Labels {
    names: Vec::new(),
    ids: None,
});

/// Each module call's label once, by id (id 1 first).
struct Labels {
    names: Vec<String>,
    ids: Option<HashMap<String, u32>>,
}
/// How many events ahead of the one written the ring's next slot is asked for (`prefetch`):
/// past the cache line being written (an event is 56 bytes), within what arrives in a memory
/// access's time.
const PREFETCH_AHEAD: usize = 4;
static RING: Mutex<Ring> = Mutex::new(Ring {
    events: Vec::new(),
    max: 0,
    next: 0,
    dropped: 0,
    started_at: None,
});

/// The calling thread's whole stack as an id (0: none): `python::sites` registers it.
pub type StackReader = fn() -> u32;
static STACK_READER: AtomicUsize = AtomicUsize::new(0);

/// Registers the function that reads the calling thread's stack.
pub fn set_stack_reader(read: StackReader) {
    STACK_READER.store(read as usize, Ordering::Release);
}

fn stack_here() -> u32 {
    let f = STACK_READER.load(Ordering::Acquire);
    if f == 0 {
        return 0;
    }
    // SAFETY: only `set_stack_reader` stores here, and it stores a `StackReader`.
    let f: StackReader = unsafe { std::mem::transmute::<usize, StackReader>(f) };
    f()
}

/// Starts a record (an earlier in-process session's events are its own file's), keeping the
/// latest `max_entries`.
pub fn start(max_entries: u64) {
    let mut ring = RING.lock().unwrap_or_else(|e| e.into_inner());
    let max = usize::try_from(max_entries).unwrap_or(usize::MAX);
    let mut events = std::mem::take(&mut ring.events);
    events.clear();
    let room = max.min(1 << 20);
    if events.capacity() < room {
        // Made once and written through now, so that its pages are the process's before the
        // program's steps run: left to the events, each new page of the ring cost them a page
        // fault (4 KiB of events: about 70), every step until it filled, and an in-process
        // session's new ring all over again. Later records reuse it.
        events = Vec::with_capacity(room);
        events.resize(room, Ring::UNUSED);
        events.clear();
    }
    *ring = Ring {
        events,
        max,
        started_at: Some(clock::Anchor::now()),
        ..Ring::default()
    };
    drop(ring);
    let mut labels = LABELS.lock().unwrap_or_else(|e| e.into_inner());
    labels.names.clear();
    labels.ids = None;
    LABEL.store(0, Ordering::Relaxed);
    UNAVAILABLE.store(false, Ordering::Relaxed);
    STARTED.store(true, Ordering::Release);
    ON.store(true, Ordering::Release);
}

/// CUDA's record could not start: there is no caching allocator whose trace entries memprof
/// can take (the report says so).
pub fn unavailable() {
    ON.store(false, Ordering::Release);
    UNAVAILABLE.store(true, Ordering::Relaxed);
}

/// The module call running from now on (`--modules`), as the events' label ("": none).
pub fn set_label(label: &str) {
    if label.is_empty() {
        LABEL.store(0, Ordering::Relaxed);
        return;
    }
    let mut labels = LABELS.lock().unwrap_or_else(|e| e.into_inner());
    let Labels { names, ids } = &mut *labels;
    let ids = ids.get_or_insert_with(HashMap::new);
    let id = match ids.get(label) {
        Some(&id) => id,
        None => {
            names.push(label.to_owned());
            let id = names.len() as u32;
            ids.insert(label.to_owned(), id);
            id
        }
    };
    LABEL.store(id, Ordering::Relaxed);
}

/// Every label the events name, by id (id 1 first).
pub fn labels() -> Vec<String> {
    LABELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .names
        .clone()
}

/// Whether events are being recorded.
#[inline]
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Records one allocation (size > 0) or free (size < 0) of a CPU block at `ptr`, made while
/// the line `tag` ran; the stack is read only then (inside measured targeted calls, where the
/// history's stacks belong).
pub fn record(ptr: u64, size: i64, tag: u64) {
    if ptr == 0 || size == 0 {
        return;
    }
    let action = if size > 0 {
        Action::Alloc
    } else {
        Action::FreeCompleted
    };
    let stack = if tag != 0 { stack_here() } else { 0 };
    push(action, -1, ptr, size.abs(), 0, tag, stack);
}

thread_local! {
    /// The last free this thread requested, and its stack: the allocator completes a free
    /// at once, on the same thread, unless a stream still uses the block.
    static FREE_REQUESTED: Cell<(u64, u32)> = const { Cell::new((0, 0)) };
}

/// Called by the shim for every trace entry of the CUDA caching allocator while the record is
/// on (src/torch/cpp/cuda_trace.cpp), inside the allocator with its lock held, on whichever
/// thread allocates or frees: no Python, no panic.
pub extern "C" fn mp_rust_history_event(
    action: i32,
    addr: u64,
    size: i64,
    stream: u64,
    device: i32,
) {
    if !is_on() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        let Some(action) = Action::of(action) else {
            return;
        };
        let tag = crate::torch::tags::current();
        let stack = match action {
            // The free's stack, read when it was requested.
            Action::FreeCompleted => FREE_REQUESTED.with(|last| {
                let (ptr, stack) = last.replace((0, 0));
                if ptr == addr {
                    stack
                } else {
                    0
                }
            }),
            _ if tag == 0 => 0,
            _ => stack_here(),
        };
        if action == Action::FreeRequested {
            FREE_REQUESTED.with(|last| last.set((addr, stack)));
        }
        push(action, device, addr, size, stream, tag, stack);
    });
}

fn push(action: Action, device: i32, ptr: u64, size: i64, stream: u64, tag: u64, stack: u32) {
    let event = Event {
        action,
        device,
        ptr,
        size,
        stream,
        time_us: clock::ticks() as i64,
        tag,
        stack,
        label: LABEL.load(Ordering::Relaxed),
    };
    let mut ring = RING.lock().unwrap_or_else(|e| e.into_inner());
    ring.push(event);
}

impl Ring {
    /// What fills the ring's room when it is made.
    const UNUSED: Event = Event {
        action: Action::Alloc,
        device: 0,
        ptr: 0,
        size: 0,
        stream: 0,
        time_us: 0,
        tag: 0,
        stack: 0,
        label: 0,
    };

    fn push(&mut self, event: Event) {
        let at = if self.events.len() < self.max {
            self.events.push(event);
            self.events.len() - 1
        } else if self.max > 0 {
            let at = self.next;
            self.events[at] = event;
            self.next = (at + 1) % self.max;
            self.dropped += 1;
            at
        } else {
            return;
        };
        self.prefetch(self.slot_after(at));
    }

    /// The slot written `PREFETCH_AHEAD` events after slot `at`, where it is in the ring's room.
    fn slot_after(&self, at: usize) -> Option<usize> {
        let ahead = at + PREFETCH_AHEAD;
        if ahead < self.max.min(self.events.capacity()) {
            Some(ahead)
        } else if self.max > 0 && self.events.len() == self.max {
            Some(ahead % self.max)
        } else {
            None
        }
    }

    /// Asks for a slot's cache line before it is written. The ring is larger than the caches
    /// and its slots' last use was long ago, so each event's write missed them, and the
    /// lock's release, a full barrier, waited for the line: most of what `push` cost (perf on
    /// benches/paired_profile.sh's CPU case: 69% of its samples at the release, 15% with this).
    #[inline]
    fn prefetch(&self, slot: Option<usize>) {
        if let Some(slot) = slot {
            // `slot` is within the ring's allocation (below its capacity).
            super::prefetch::line(self.events.as_ptr().wrapping_add(slot));
        }
    }

    /// The events kept, oldest first, their times as ticks.
    fn in_order(&self) -> Vec<Event> {
        let (newer, older) = self.events.split_at(self.next.min(self.events.len()));
        older.iter().chain(newer).copied().collect()
    }

    /// The events kept, oldest first, their times µs since the epoch.
    fn taken(&self) -> Vec<Event> {
        let mut events = self.in_order();
        if let Some(from) = self.started_at {
            let times = clock::Converter::new(from, clock::Anchor::now());
            for e in &mut events {
                e.time_us = times.unix_us(e.time_us as u64);
            }
        }
        events
    }
}

/// What a stopped record holds.
pub struct Taken {
    /// The events kept, oldest first.
    pub events: Vec<Event>,
    /// How many older ones the ring dropped.
    pub dropped: u64,
    /// Whether the record ever started (on CUDA, once the program had initialised CUDA).
    pub started: bool,
    /// Whether CUDA's could not start (`unavailable`).
    pub unavailable: bool,
}

/// Stops recording and hands over what it holds.
pub fn stop() -> Taken {
    ON.store(false, Ordering::Release);
    let ring = RING.lock().unwrap_or_else(|e| e.into_inner());
    Taken {
        events: ring.taken(),
        dropped: ring.dropped,
        started: STARTED.swap(false, Ordering::AcqRel),
        unavailable: UNAVAILABLE.swap(false, Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: u64) -> Event {
        Event {
            action: Action::Alloc,
            device: -1,
            ptr: n,
            size: n as i64,
            stream: 0,
            time_us: 0,
            tag: 0,
            stack: 0,
            label: 0,
        }
    }

    #[test]
    fn the_shims_numbers_name_torchs_actions() {
        let names: Vec<&str> = (0..8).map(|i| Action::of(i).unwrap().name()).collect();
        assert_eq!(
            names,
            [
                "alloc",
                "free_requested",
                "free_completed",
                "segment_alloc",
                "segment_free",
                "segment_map",
                "segment_unmap",
                "oom"
            ]
        );
        assert_eq!(Action::of(8), None);
        assert_eq!(Action::of(-1), None);
    }

    #[test]
    fn a_record_stamps_its_events_with_the_times_they_happened_and_keeps_its_room() {
        let before = clock::Anchor::now().unix_us;
        start(4);
        let room = RING.lock().unwrap().events.capacity();
        for n in 1..=6 {
            push(Action::Alloc, -1, n, 8, 0, 0, 0);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        let taken = stop();
        let after = clock::Anchor::now().unix_us;
        assert_eq!(
            taken.events.iter().map(|e| e.ptr).collect::<Vec<_>>(),
            [3, 4, 5, 6]
        );
        assert_eq!(taken.dropped, 2);
        for e in &taken.events {
            // Made before the sleep: at least 5 ms before the record stopped.
            assert!(
                e.time_us >= before - 1_000 && e.time_us <= after - 4_000,
                "{e:?}"
            );
        }
        start(4);
        let ring = RING.lock().unwrap();
        assert!(ring.events.is_empty());
        assert_eq!(ring.events.capacity(), room);
        drop(ring);
        stop();
    }

    #[test]
    fn the_slot_asked_for_ahead_is_in_the_room_and_follows_the_ring_round() {
        let mut ring = Ring {
            max: 6,
            events: Vec::with_capacity(6),
            ..Ring::default()
        };
        // Filling: ahead while within the room, then none until the ring is full.
        assert_eq!(ring.slot_after(0), Some(4));
        assert_eq!(ring.slot_after(1), Some(5));
        assert_eq!(ring.slot_after(2), None);
        for n in 1..=6 {
            ring.push(event(n));
        }
        // Full: the slots the next events overwrite, round the ring.
        assert_eq!(ring.slot_after(5), Some(3));
        assert_eq!(ring.slot_after(2), Some(0));
        // A ring whose room is larger than its maximum (kept from a longer record).
        let mut roomy = Ring {
            max: 3,
            events: Vec::with_capacity(16),
            ..Ring::default()
        };
        assert_eq!(roomy.slot_after(0), None);
        for n in 1..=3 {
            roomy.push(event(n));
        }
        assert_eq!(roomy.slot_after(1), Some(2));
        assert_eq!(Ring::default().slot_after(0), None);
    }

    #[test]
    fn a_full_ring_keeps_the_latest_events_in_order_and_counts_the_dropped() {
        let mut ring = Ring {
            max: 3,
            ..Ring::default()
        };
        for n in 1..=7 {
            ring.push(event(n));
        }
        let kept: Vec<u64> = ring.in_order().iter().map(|e| e.ptr).collect();
        assert_eq!(kept, [5, 6, 7]);
        assert_eq!(ring.dropped, 4);
        let mut short = Ring {
            max: 3,
            ..Ring::default()
        };
        short.push(event(1));
        short.push(event(2));
        assert_eq!(
            short.in_order().iter().map(|e| e.ptr).collect::<Vec<_>>(),
            [1, 2]
        );
        let mut none = Ring::default();
        none.push(event(1));
        assert!(none.in_order().is_empty());
    }
}
