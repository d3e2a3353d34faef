//! `memprof live PID`: the live view of a program that `memprof run` runs, drawn here from its
//! numbers asked through its socket once a second (output/socket.rs, live_view.rs); the
//! view ends with `q` or when the run does.
use super::live_view;
use crate::cli::LiveArgs;
use crate::error::{Error, Result};
use crate::model::live::LiveState;
use crate::output::{self, socket};
use std::cell::Cell;
use std::os::fd::AsFd;

pub fn live(args: LiveArgs) -> Result<i32> {
    need_terminal("memprof live")?;
    let pid = args.pid;
    if view(pid)? {
        output::note(&format!("process {pid} has ended its run"));
    }
    Ok(0)
}

/// An error unless standard input and output are a terminal (`what` draws there).
pub fn need_terminal(what: &str) -> Result<()> {
    // SAFETY: isatty only reads the descriptors' state.
    if unsafe { libc::isatty(1) == 0 || libc::isatty(0) == 0 } {
        return Err(Error::usage(format!(
            "{what} draws in a terminal, and standard input or output is not one"
        ))
        .hint("for the report of a running program in a file or a pipe: memprof snapshot PID"));
    }
    Ok(())
}

/// The live view of `pid` until `q` or its run's end (then true).
pub fn view(pid: u32) -> Result<bool> {
    // The first answer says whether the PID is one memprof runs (an error otherwise); a run
    // just started has its socket and its numbers within seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let first: LiveState = loop {
        match socket::ask_live(pid).and_then(|text| parse(&text)) {
            Ok(state) => break state,
            Err(_) if std::time::Instant::now() < deadline && starting_memprof(pid) => {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    };
    let gone = Cell::new(false);
    let mut first = Some(first);
    let source = || {
        if let Some(s) = first.take() {
            return Some(s);
        }
        match socket::ask_live(pid).and_then(|text| parse(&text)) {
            Ok(s) => Some(s),
            Err(_) => {
                gone.set(true);
                None
            }
        }
    };
    let tty = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    live_view::show(source, tty, None, || gone.get())?;
    Ok(gone.get())
}

/// Whether `pid` runs memprof (its command line names it): a run starting up, worth waiting for.
fn starting_memprof(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("memprof"))
        .unwrap_or(false)
}

fn parse(text: &str) -> Result<LiveState> {
    serde_json::from_str(text)
        .map_err(|e| Error::usage(format!("the run answered what memprof cannot read ({e})")))
}
