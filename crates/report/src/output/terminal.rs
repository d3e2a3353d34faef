//! The terminal a report is printed on: how many columns it has, when standard output is one.
//! Files and pipes get None, and with it the full-width table that scripts and diffs rely on.
use std::io::IsTerminal;

/// The width of the terminal on standard output: `COLUMNS` when set (as `ls` and git honour
/// it), else what the terminal says; None when standard output is not a terminal.
pub fn width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return Some(n);
    }
    // SAFETY: TIOCGWINSZ fills a winsize for a terminal file descriptor; zeroed is valid.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(size.ws_col as usize)
}
