//! Signals and abrupt endings. The first Ctrl-C raises KeyboardInterrupt in the script (so
//! `finally` blocks run and memprof still prints the report of what ran); a second one exits at
//! once. SIGTERM is not the script's to catch (python leaves it at the default, which kills): the
//! report of what ran is written from Rust's data, then the process dies of SIGTERM as python's
//! would. `os._exit` writes that report before it exits. Reports written this way come from
//! Rust's data alone (the main thread may be stuck in a CUDA synchronisation or holding the GIL).
use crate::error::{exit_code, Error, Result};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant};

static SIGNALS: AtomicU32 = AtomicU32::new(0);
static SCRIPT_RUNNING: AtomicBool = AtomicBool::new(false);
/// What writes the report when the process ends abruptly.
pub type EmergencyReport = Box<dyn Fn(&Ending) + Send + Sync>;
static EMERGENCY_REPORT: OnceLock<EmergencyReport> = OnceLock::new();
/// Held while the run's own report is written; true once it was. An abrupt ending then leaves
/// it alone (a SIGTERM after the report must not replace it with a partial one) and, while it is
/// being written, waits for it a little.
static FINAL_REPORT: Mutex<bool> = Mutex::new(false);
/// The write end of the pipe that wakes the SIGTERM thread (-1 before `install`).
static TERM_PIPE: AtomicI32 = AtomicI32::new(-1);
/// The process whose thread reads that pipe. A child forked by C code, which the at-fork hook
/// never saw, shares the pipe with its parent: its SIGTERM must not wake the parent's thread.
static TERM_OWNER: AtomicI32 = AtomicI32::new(0);
/// The program ended by an uncaught KeyboardInterrupt: the process ends as python's does then,
/// by SIGINT at its default action (the shell reads 130), once the report is written.
static DIE_OF_SIGINT: AtomicBool = AtomicBool::new(false);

/// How the program ended when memprof had to write its report without Python's help.
pub struct Ending {
    /// The report's outcome status: `interrupted`, `terminated`, `os_exit`.
    pub status: &'static str,
    pub exit_code: i32,
    /// Said in the report's warnings.
    pub warning: String,
}

/// Whether a Ctrl-C arrived: the exit code it calls for.
pub fn received() -> Option<i32> {
    (SIGNALS.load(Ordering::SeqCst) > 0).then_some(exit_code::INTERRUPTED)
}

/// While true, the first Ctrl-C is turned into KeyboardInterrupt in the script.
pub fn set_script_running(running: bool) {
    SCRIPT_RUNNING.store(running, Ordering::SeqCst);
}

/// What a second Ctrl-C, SIGTERM or `os._exit` writes before the process ends.
pub fn set_emergency_report(f: EmergencyReport) {
    let _ = EMERGENCY_REPORT.set(f);
}

/// Writes the run's own report through `write`; from then on no emergency report replaces it.
pub fn write_final_report<T>(write: impl FnOnce() -> T) -> T {
    let mut done = FINAL_REPORT.lock().unwrap_or_else(|e| e.into_inner());
    let result = write();
    *done = true;
    result
}

/// `lock`, waiting at most two seconds: an abrupt ending must not wait forever on a thread that
/// may be stuck (writing to a FIFO nobody reads, say). A poisoned lock is taken as it is.
pub fn lock_within_two_seconds<T>(lock: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match lock.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// Writes the emergency report, if one is set and the run's own report was not written. A final
/// report still being written gets two seconds, then is given up.
pub fn write_emergency_report(ending: &Ending) {
    let done = lock_within_two_seconds(&FINAL_REPORT);
    if done.as_deref() != Some(&false) {
        return;
    }
    if let Some(report) = EMERGENCY_REPORT.get() {
        report(ending);
    }
}

/// The OS-level SIGINT handler, over ctrlc's. The first Ctrl-C is python's, in the handler itself
/// as CPython's own handler does it: the interrupt is tripped before the handler returns, so a
/// main thread blocked in a lock, a queue or a join (a Pool's map, a DataLoader's next) wakes
/// from the signal (EINTR) and finds KeyboardInterrupt waiting. Tripped later, from another
/// thread, it would sleep on. A second Ctrl-C goes on to ctrlc's handler, which wakes its thread
/// (`on_second_sigint`) to write the report and exit.
extern "C" fn on_sigint_signal(sig: libc::c_int) {
    if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
        if SCRIPT_RUNNING.load(Ordering::SeqCst) {
            // SAFETY: async-signal-safe and needs no GIL (CPython docs).
            unsafe { pyo3::ffi::PyErr_SetInterruptEx(libc::SIGINT) };
        }
        return;
    }
    let ctrlc = CTRLC_HANDLER.load(Ordering::SeqCst);
    if ctrlc > 1 {
        // SAFETY: ctrlc's own handler (a plain `fn(c_int)`: it sets no SA_SIGINFO), which
        // only posts a semaphore.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(ctrlc) };
        handler(sig);
    }
}

/// ctrlc's SIGINT handler, which `on_sigint_signal` chains to (0: none yet).
static CTRLC_HANDLER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// ctrlc's thread, woken by a second Ctrl-C: the report so far, then exit at once.
fn on_second_sigint() {
    eprintln!("\nmemprof: interrupted again, exiting now");
    write_emergency_report(&Ending {
        status: "interrupted",
        exit_code: exit_code::INTERRUPTED,
        warning: "interrupted twice: this report was written without Python's help".into(),
    });
    // SAFETY: exits the process without running destructors: the main thread may be stuck.
    unsafe { libc::_exit(exit_code::INTERRUPTED) };
}

extern "C" fn on_sigterm(_: libc::c_int) {
    // Only async-signal-safe work here: one write to a pipe wakes the thread that reports.
    // SAFETY: getpid(2), signal(2) and raise(3) are async-signal-safe.
    if unsafe { libc::getpid() } != TERM_OWNER.load(Ordering::SeqCst) {
        // A fork that memprof did not see: no thread of this process reads the pipe, so the
        // process dies of SIGTERM as python's would.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            libc::raise(libc::SIGTERM);
        }
        return;
    }
    let fd = TERM_PIPE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the byte's value does not matter.
        unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
    }
}

/// Writes the report, then dies of SIGTERM with the default action, as python would have.
fn terminate() -> ! {
    write_emergency_report(&Ending {
        status: "terminated",
        exit_code: exit_code::TERMINATED,
        warning: "terminated by SIGTERM: the program was stopped where it was, as python's \
                  default handling does; this report was written without Python's help"
            .into(),
    });
    // SAFETY: restores the default action and raises it on this thread (which was started with
    // SIGTERM blocked: unblocked first), which ends the process.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        let mut term: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut term);
        libc::sigaddset(&mut term, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &term, std::ptr::null_mut());
        libc::raise(libc::SIGTERM);
        libc::_exit(exit_code::TERMINATED)
    }
}

/// Installs the handlers. With `take_sigint`, Python's own SIGINT handler must already be
/// `default_int_handler` (so that PyErr_SetInterruptEx raises KeyboardInterrupt); this then takes
/// the OS-level handler. SIGTERM gets memprof's handler unless it was ignored; a script that
/// installs its own (`signal.signal(SIGTERM, ...)`) replaces memprof's, as it replaces python's.
pub fn install(take_sigint: bool) -> Result<()> {
    if handler_now(libc::SIGTERM) != Some(libc::SIG_IGN) {
        install_sigterm()?;
    }
    if !take_sigint {
        return Ok(());
    }
    with_signals_blocked(|| ctrlc::set_handler(on_second_sigint))
        .map_err(|e| Error::usage(format!("cannot install the Ctrl-C handler: {e}")))?;
    // SAFETY: replaces ctrlc's handler with one that only does async-signal-safe work and
    // chains to it; no SA_RESTART, as CPython's own: a blocked main thread must see EINTR.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        let mut ctrlc: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint_signal as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = libc::SA_ONSTACK;
        if libc::sigaction(libc::SIGINT, &action, &mut ctrlc) != 0 {
            return Err(Error::usage("cannot install the Ctrl-C handler"));
        }
        CTRLC_HANDLER.store(ctrlc.sa_sigaction, Ordering::SeqCst);
    }
    Ok(())
}

/// Whether SIGINT is ignored now: inherited ignored (a script's background job, `nohup`-like
/// launchers), which python leaves as it is, and so does memprof (SIGTERM likewise, in
/// `install`).
pub fn sigint_ignored() -> bool {
    handler_now(libc::SIGINT) == Some(libc::SIG_IGN)
}

/// The process's current handler of `signal` (SIG_DFL, SIG_IGN or a function's address); None
/// where it cannot be read.
fn handler_now(signal: libc::c_int) -> Option<libc::sighandler_t> {
    // SAFETY: queries the current action without changing it.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(signal, std::ptr::null(), &mut action) == 0).then_some(action.sa_sigaction)
    }
}

/// Runs `f` (which starts a thread of memprof's) with SIGINT and SIGTERM blocked, so that the
/// thread inherits the mask: the kernel then delivers the program's signals to its own threads
/// (the main thread, mostly), whose blocking calls they must interrupt, as under python.
pub fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sets and restores this thread's signal mask.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGINT);
        libc::sigaddset(&mut block, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        let result = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

/// Takes SIGTERM: on it, a thread of this process writes the report so far (the emergency
/// report), then the process dies of SIGTERM at the default action, as python's would.
pub fn install_sigterm() -> Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors; CLOEXEC keeps them out of the script's children.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::usage("cannot create the SIGTERM pipe"));
    }
    let read_end = fds[0];
    with_signals_blocked(|| {
        std::thread::Builder::new()
            .name("memprof-sigterm".into())
            .spawn(move || {
                let mut byte = 0u8;
                // SAFETY: reads one byte from our own pipe; blocks until SIGTERM writes it.
                while unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) } != 1 {}
                terminate();
            })
    })
    .map_err(|e| Error::usage(format!("cannot start the SIGTERM thread: {e}")))?;
    let old = TERM_PIPE.swap(fds[1], Ordering::SeqCst);
    // SAFETY: the pid of this process.
    TERM_OWNER.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    if old >= 0 {
        // A forked child's copy of its parent's pipe: its parent's thread reads the other end.
        // SAFETY: closes this process's own copy of the descriptor.
        unsafe { libc::close(old) };
    }
    // SAFETY: installs a handler that only does async-signal-safe work.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigterm as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = libc::SA_RESTART;
        if libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut()) != 0 {
            return Err(Error::usage("cannot install the SIGTERM handler"));
        }
    }
    Ok(())
}

/// Whether memprof's SIGTERM handler is the process's now (the program has not set its own).
fn owns_sigterm() -> bool {
    handler_now(libc::SIGTERM) == Some(on_sigterm as *const () as usize)
}

/// This process was just forked from the run (Python's at-fork hook): the SIGTERM thread was not
/// copied, so a child that keeps memprof's handler gets a pipe and a thread of its own (its
/// SIGTERM writes the child's report, then kills the child, never its parent).
pub fn forked() {
    if owns_sigterm() {
        if let Err(e) = install_sigterm() {
            eprintln!("{e}");
        }
    }
}

/// The program ended by an uncaught KeyboardInterrupt (python then dies of SIGINT).
pub fn end_by_sigint() {
    DIE_OF_SIGINT.store(true, Ordering::SeqCst);
}

/// Ends the process with `code`, or, after an uncaught KeyboardInterrupt, as python's
/// `exit_sigint` does: SIGINT at its default action, exit 130 only if that did not end it.
pub fn exit(code: i32) -> ! {
    if DIE_OF_SIGINT.load(Ordering::SeqCst) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: restores the default action and sends the signal to this process.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::kill(libc::getpid(), libc::SIGINT);
        }
    }
    std::process::exit(code)
}
