//! `memprof run --live`: the live view (`memprof_report::commands::live_view`) drawn on the terminal while the
//! program runs. The program's standard output and error go to a pseudo-terminal of the same
//! size and settings (so it still sees a terminal: `isatty`, line buffering, colours), whose
//! output the view prints above itself; when the view closes (`q`, or the program's end) they
//! go back to the terminal itself and what was left in between is printed.
use crate::cli::config::RunConfig;
use crate::error::{Error, Result};
use crate::session;
use memprof_report::commands::live_view::{self, Ended};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// The view running beside the program.
pub struct Live {
    finished: Arc<AtomicBool>,
    view: JoinHandle<()>,
}

/// Starts the view (None without --live); refused, with the fix, where standard output or input
/// is not a terminal.
pub fn start(config: &RunConfig) -> Result<Option<Live>> {
    if !config.live {
        return Ok(None);
    }
    // SAFETY: isatty only reads the descriptors' state.
    if unsafe { libc::isatty(1) == 0 || libc::isatty(0) == 0 } {
        return Err(Error::usage(
            "--live draws in a terminal, and standard input or output is not one",
        )
        .hint("run it in a terminal, or watch the run from one with `memprof live PID`"));
    }
    let pty = Pty::open()?;
    let finished = Arc::new(AtomicBool::new(false));
    let config = config.clone();
    let done = Arc::clone(&finished);
    let started = Instant::now();
    // Signals blocked, as every thread of memprof's: the program's own threads take them.
    let view = crate::capture::interrupt::with_signals_blocked(|| {
        std::thread::Builder::new()
            .name("memprof-live".into())
            .spawn(move || {
                let mut pty = pty;
                let tty = pty.terminal();
                let ended = match tty {
                    Ok(tty) => live_view::show(
                        || session::live::state(&config, started.elapsed().as_secs_f64()),
                        tty,
                        Some(&mut pty.master),
                        || done.load(Ordering::SeqCst),
                    ),
                    Err(e) => Err(e),
                };
                pty.give_back();
                if ended.as_ref().is_ok_and(|e| *e == Ended::Closed) {
                    crate::output::note("the live view closed; the program runs on");
                }
            })
    })?;
    Ok(Some(Live { finished, view }))
}

/// The program ended: the view closes, the terminal is the program's again.
pub fn stop(live: Option<Live>) {
    if let Some(live) = live {
        live.finished.store(true, Ordering::SeqCst);
        let _ = live.view.join();
    }
}

/// The program's standard output and error on a pseudo-terminal, the originals kept.
struct Pty {
    master: File,
    saved_out: OwnedFd,
    saved_err: OwnedFd,
}

impl Pty {
    fn open() -> std::io::Result<Pty> {
        let mut master = -1;
        let mut slave = -1;
        // SAFETY: plain descriptor calls on valid buffers; every descriptor made is owned
        // below or closed here.
        unsafe {
            let mut termios: libc::termios = std::mem::zeroed();
            let mut size: libc::winsize = std::mem::zeroed();
            libc::tcgetattr(1, &mut termios);
            libc::ioctl(1, libc::TIOCGWINSZ, &mut size);
            if libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                &termios,
                &size,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let flags = libc::fcntl(master, libc::F_GETFL);
            libc::fcntl(master, libc::F_SETFL, flags | libc::O_NONBLOCK);
            libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC);
            let saved_out = OwnedFd::from_raw_fd(libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3));
            let saved_err = OwnedFd::from_raw_fd(libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3));
            libc::dup2(slave, 1);
            libc::dup2(slave, 2);
            libc::close(slave);
            Ok(Pty {
                master: File::from_raw_fd(master),
                saved_out,
                saved_err,
            })
        }
    }

    /// The real terminal, for the view to draw on.
    fn terminal(&self) -> std::io::Result<File> {
        Ok(File::from(self.saved_out.try_clone()?))
    }

    /// Standard output and error back to the terminal; what the program wrote since the view
    /// last printed goes there first.
    fn give_back(mut self) {
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut self.master, &mut rest);
        // SAFETY: dup2 onto the standard descriptors from descriptors this owns.
        unsafe {
            libc::dup2(self.saved_out.as_raw_fd(), 1);
            libc::dup2(self.saved_err.as_raw_fd(), 2);
        }
        let mut more = Vec::new();
        let _ = std::io::Read::read_to_end(&mut self.master, &mut more);
        rest.extend(more);
        let _ = std::io::Write::write_all(&mut std::io::stdout(), &rest);
    }
}
