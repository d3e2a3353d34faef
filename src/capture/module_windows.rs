//! `--modules`' measurement windows: each module call's allocated bytes at its start and end,
//! and their highest value while it runs, forward (src/python/ext/module_calls.rs) and backward
//! (backward.rs). Each opening and closing reads the reporter's tally through the shim's scope
//! take (`torch::take_allocated`: the allocated bytes now and their maximum since the previous
//! scope take, a maximum the lines' samples still see) and folds that maximum into every window
//! open now. A module call costs a short lock and a few cache lines here; a sample of the
//! recorder (its lock, the whole tally, every open line's window) cost more than the rest of the
//! call's work on a host-bound GPU step. With --collectives a window also keeps the
//! collectives' counters at its start.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// What a window measured of `allocated_bytes.all`: at its start and end, and its peak; and
/// with `--collectives`, the collectives' bytes per kind, then their calls per kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopeReading {
    pub start: i64,
    pub end: i64,
    pub peak: i64,
    pub collectives: Option<Vec<i64>>,
}

/// One open window.
struct Window {
    id: u64,
    start: i64,
    peak: i64,
    collectives: Option<Box<[i64]>>,
}

struct Windows {
    /// In the order they opened: forward calls nest, so the one that closes is near the end.
    open: Vec<Window>,
    next_id: u64,
}

impl Windows {
    /// A reading of the tally: the highest allocated bytes since the previous one reached every
    /// window open now.
    fn fold(&mut self, max: i64) {
        for w in self.open.iter_mut() {
            w.peak = w.peak.max(max);
        }
    }

    /// Opens a window at a reading (`current` allocated bytes, the collectives' counters).
    fn open_at(&mut self, current: i64, collectives: Option<Box<[i64]>>) -> u64 {
        self.next_id += 1;
        self.open.push(Window {
            id: self.next_id,
            start: current,
            peak: current,
            collectives,
        });
        self.next_id
    }

    /// Closes window `id` at a reading: what it measured, None if it is not open.
    fn close_at(
        &mut self,
        id: u64,
        current: i64,
        collectives: Option<&[i64]>,
    ) -> Option<ScopeReading> {
        let at = self.open.iter().rposition(|w| w.id == id)?;
        let w = self.open.remove(at);
        let collectives = w
            .collectives
            .zip(collectives)
            .map(|(start, end)| end.iter().zip(start.iter()).map(|(e, s)| e - s).collect());
        Some(ScopeReading {
            start: w.start,
            end: current,
            peak: w.peak,
            collectives,
        })
    }
}

static WINDOWS: Mutex<Windows> = Mutex::new(Windows {
    open: Vec::new(),
    next_id: 0,
});

/// What is measured: the counted CUDA device's tally (else the CPU's), and the collectives.
static DEVICE: AtomicBool = AtomicBool::new(false);
static COLLECTIVES: AtomicBool = AtomicBool::new(false);
/// Windows open now, read without the lock (the recorder follows the program to another device
/// only while none is).
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// What the windows measure from now on: the CUDA device's allocated bytes (else the CPU's),
/// and the collectives' counters. Windows still open are forgotten (a new session).
pub fn configure(device: bool, collectives: bool) {
    DEVICE.store(device, Ordering::Relaxed);
    COLLECTIVES.store(collectives, Ordering::Relaxed);
    lock().open.clear();
    OPEN.store(0, Ordering::Relaxed);
}

/// Whether any window is open.
pub fn any_open() -> bool {
    OPEN.load(Ordering::Relaxed) > 0
}

fn lock() -> MutexGuard<'static, Windows> {
    WINDOWS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Opens a window now; its id.
pub fn open() -> u64 {
    Moment::new().open()
}

/// Closes window `id` now: its reading, None if it is not open.
pub fn close(id: u64) -> Option<ScopeReading> {
    Moment::new().close(id)
}

/// Windows opened and closed at one moment (the calls one gradient hook holds, the backwards
/// still open when a pass ends): one lock and one reading of the tally for all of them, taken
/// when the first opens or closes; nothing is allocated between them.
pub struct Moment {
    held: Option<(MutexGuard<'static, Windows>, Reading)>,
}

/// The tally at a moment.
struct Reading {
    current: i64,
    collectives: Option<Box<[i64]>>,
}

impl Moment {
    pub fn new() -> Self {
        Moment { held: None }
    }

    fn at(&mut self) -> &mut (MutexGuard<'static, Windows>, Reading) {
        self.held.get_or_insert_with(|| {
            let mut windows = lock();
            let (current, max) = crate::torch::take_allocated(DEVICE.load(Ordering::Relaxed));
            windows.fold(max);
            let collectives = COLLECTIVES.load(Ordering::Relaxed).then(|| {
                let mut c = [0; crate::torch::collectives::LEN];
                crate::torch::collectives::take(&mut c);
                Box::from(c)
            });
            (
                windows,
                Reading {
                    current,
                    collectives,
                },
            )
        })
    }

    /// Opens a window at this moment; its id.
    pub fn open(&mut self) -> u64 {
        let (windows, now) = self.at();
        let id = windows.open_at(now.current, now.collectives.clone());
        OPEN.store(windows.open.len(), Ordering::Relaxed);
        id
    }

    /// Closes window `id` at this moment: its reading, None if it is not open.
    pub fn close(&mut self, id: u64) -> Option<ScopeReading> {
        let (windows, now) = self.at();
        let reading = windows.close_at(id, now.current, now.collectives.as_deref());
        OPEN.store(windows.open.len(), Ordering::Relaxed);
        reading
    }
}

impl Default for Moment {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows() -> Windows {
        Windows {
            open: Vec::new(),
            next_id: 0,
        }
    }

    #[test]
    fn a_window_sees_the_peak_inside_it_and_closes_once() {
        let mut w = windows();
        // 1000 bytes live; 4096 allocated and freed; 16 more.
        let id = w.open_at(1000, None);
        w.fold(5096);
        let reading = w.close_at(id, 1016, None).expect("an open window");
        assert_eq!(
            (reading.start, reading.end, reading.peak),
            (1000, 1016, 5096)
        );
        assert_eq!(w.close_at(id, 1016, None), None, "closed once");
    }

    #[test]
    fn nested_windows_see_only_the_maxima_after_they_opened() {
        let mut w = windows();
        let outer = w.open_at(1000, Some(Box::from([0, 0])));
        w.fold(5096);
        let inner = w.open_at(1000, Some(Box::from([64, 1])));
        w.fold(1016);
        let inner = w.close_at(inner, 1016, Some(&[64, 1])).unwrap();
        let outer = w.close_at(outer, 1016, Some(&[96, 2])).unwrap();
        assert_eq!((inner.start, inner.end, inner.peak), (1000, 1016, 1016));
        assert_eq!(inner.collectives, Some(vec![0, 0]));
        assert_eq!((outer.start, outer.end, outer.peak), (1000, 1016, 5096));
        assert_eq!(outer.collectives, Some(vec![96, 2]));
        assert!(w.open.is_empty());
    }
}
