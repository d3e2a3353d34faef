//! `--history`'s own record of the CPU's allocation events (libtorch keeps no history there): a
//! ring of the latest N, each with the targeted line running and, while one runs, the
//! allocating thread's whole Python stack (found by the stack reader `python::sites` registers).
//! Recorded inside the allocator, on the allocating thread: no Python, no panic.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// One allocation (size > 0) or free (size < 0) of a CPU block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub ptr: u64,
    pub size: i64,
    /// µs since the epoch (the clock of torch's CUDA trace entries).
    pub time_us: i64,
    /// The targeted line running then (`torch::tags::encode`; 0: none).
    pub tag: u64,
    /// The thread's whole stack (`python::sites::stacks`; 0: none read).
    pub stack: u32,
}

#[derive(Default)]
struct Ring {
    events: Vec<Event>,
    max: usize,
    /// Where the next event goes once the ring is full.
    next: usize,
    dropped: u64,
}

static ON: AtomicBool = AtomicBool::new(false);
static RING: Mutex<Ring> = Mutex::new(Ring {
    events: Vec::new(),
    max: 0,
    next: 0,
    dropped: 0,
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
    *ring = Ring {
        events: Vec::with_capacity(max.min(1 << 20)),
        max,
        ..Ring::default()
    };
    ON.store(true, Ordering::Release);
}

/// Whether events are being recorded.
#[inline]
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Records one allocation or free of `size` bytes at `ptr`, made while the line `tag` ran; the
/// stack is read only then (inside measured targeted calls, where the history's stacks belong).
pub fn record(ptr: u64, size: i64, tag: u64) {
    if ptr == 0 || size == 0 {
        return;
    }
    let stack = if tag != 0 { stack_here() } else { 0 };
    let time_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    let event = Event {
        ptr,
        size,
        time_us,
        tag,
        stack,
    };
    let mut ring = RING.lock().unwrap_or_else(|e| e.into_inner());
    ring.push(event);
}

impl Ring {
    fn push(&mut self, event: Event) {
        if self.events.len() < self.max {
            self.events.push(event);
        } else if self.max > 0 {
            let at = self.next;
            self.events[at] = event;
            self.next = (at + 1) % self.max;
            self.dropped += 1;
        }
    }

    /// The events kept, oldest first.
    fn in_order(&self) -> Vec<Event> {
        let (newer, older) = self.events.split_at(self.next.min(self.events.len()));
        older.iter().chain(newer).copied().collect()
    }
}

/// Stops recording: the events kept, oldest first, and how many older ones the ring dropped.
pub fn stop() -> (Vec<Event>, u64) {
    ON.store(false, Ordering::Release);
    let ring = RING.lock().unwrap_or_else(|e| e.into_inner());
    (ring.in_order(), ring.dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: u64) -> Event {
        Event {
            ptr: n,
            size: n as i64,
            time_us: 0,
            tag: 0,
            stack: 0,
        }
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
