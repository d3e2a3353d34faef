//! The tracker's own thread, where `MEMPROF_TRACKER_THREAD=1` asks for it (off by default: on an
//! H100 it halved memprof's code on the launching thread and left that thread's time the same,
//! and on this project's 2-core build machine it was no cheaper than recording inline;
//! BENCHMARKS.md, "The tracker on a thread of its own"). It records the reporter's queue
//! (queue.rs) while events come (it looks every `POLL`, and sleeps once none came for a while;
//! the allocating thread wakes it at `queue::WAKE_AT` waiting events), so that the tracker's
//! maps, the sites' tallies and the timeline are read and written on a core of their own, not
//! between the launches of the threads that set a GPU step's pace (the program's and
//! autograd's). A full queue is still recorded by the thread that fills it: where this thread
//! lags, and where there is none (in a forked child). Whatever reads the tracker records the
//! queue first (`peak::lock`), as before, so every reading sees every event before it, in
//! order.
//!
//! It runs no Python and never takes the allocator's lock (recording is the tracker's own
//! arithmetic), so the threads that wait on it inside the allocator cannot deadlock with it;
//! it is started with every signal blocked, so that no signal meant for the program lands on it.
//! A fork waits until it holds no lock (`pthread_atfork`): a child forked while it recorded
//! (a DataLoader's workers) would find the tracker locked by a thread it does not have.
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{MutexGuard, OnceLock};
use std::thread::Thread;

/// The thread, once started.
static THREAD: OnceLock<Thread> = OnceLock::new();
/// Whether THREAD runs in this process (a forked child inherits the handle, not the thread).
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Set by the one caller that starts it.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Starts the thread when tracking starts, where `MEMPROF_TRACKER_THREAD=1` asks for it
/// (tests/tracker_thread.rs runs a report with it and without, and compares).
pub fn start_if_asked() {
    if std::env::var_os("MEMPROF_TRACKER_THREAD").is_some_and(|v| v == "1") {
        start();
    }
}

/// Starts the thread, once per process; a failure to start leaves the recording to the
/// allocating threads.
pub fn start() {
    if STARTED.load(Ordering::Relaxed) || STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    // The new thread inherits this thread's signal mask: every signal blocked while it is made,
    // then this thread's own mask back.
    // SAFETY: sigfillset and pthread_sigmask write only the sets passed, which live here.
    let previous = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut previous);
        previous
    };
    let spawned = std::thread::Builder::new()
        .name("memprof-peak".into())
        .spawn(run);
    // SAFETY: as above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
    }
    if let Ok(handle) = spawned {
        let _ = THREAD.set(handle.thread().clone());
        // SAFETY: the handlers are `extern "C"` functions that live as long as the process.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_in_parent),
                Some(after_fork_in_child),
            );
        }
        RUNNING.store(true, Ordering::Release);
    }
}

thread_local! {
    /// The tracker's lock, held by the forking thread across a fork.
    static HELD_ACROSS_FORK: RefCell<Option<MutexGuard<'static, Option<super::Tracker>>>> =
        const { RefCell::new(None) };
}

/// Before a fork: the tracker's lock is taken, so that the thread holds it at no fork.
extern "C" fn before_fork() {
    let guard = super::TRACKER.lock().unwrap_or_else(|e| e.into_inner());
    let _ = HELD_ACROSS_FORK.try_with(|held| *held.borrow_mut() = Some(guard));
}

extern "C" fn after_fork_in_parent() {
    let _ = HELD_ACROSS_FORK.try_with(|held| held.borrow_mut().take());
}

/// In the child (the forking thread alone): the lock it took is let go, and the thread is not
/// there.
extern "C" fn after_fork_in_child() {
    RUNNING.store(false, Ordering::Release);
    let _ = HELD_ACROSS_FORK.try_with(|held| held.borrow_mut().take());
}

/// Enough events wait: the thread, if it runs and sleeps, starts looking at the queue again
/// (else the allocating thread records it when it is full).
pub fn wake() {
    if RUNNING.load(Ordering::Acquire) && PARKED.load(Ordering::Acquire) {
        if let Some(thread) = THREAD.get() {
            thread.unpark();
        }
    }
}

/// Whether the thread sleeps until woken, as it does once no event came for `IDLE_POLLS` looks;
/// else it looks at the queue every `POLL` and records it when `DRAIN_AT` events wait. Waking
/// it costs the allocating thread a system call (0.13 ms a step of the CPU's MLP here, where the
/// thread woken every 128 events cost more than it saved): a running job's steady stream of
/// events never wakes it.
static PARKED: AtomicBool = AtomicBool::new(true);
const POLL: std::time::Duration = std::time::Duration::from_micros(200);
const IDLE_POLLS: u32 = 1000;
const DRAIN_AT: usize = 64;

fn run() {
    loop {
        std::thread::park();
        PARKED.store(false, Ordering::Release);
        let mut idle = 0;
        while idle < IDLE_POLLS {
            if super::queue::pending() >= DRAIN_AT {
                drop(super::lock());
                idle = 0;
            } else {
                idle += 1;
            }
            std::thread::sleep(POLL);
        }
        PARKED.store(true, Ordering::Release);
    }
}
