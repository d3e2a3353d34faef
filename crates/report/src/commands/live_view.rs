//! The live view in the terminal: a fixed area at the bottom of the terminal (ratatui on
//! crossterm), redrawn about once a second from a source of states, with the program's own
//! output (read from a pseudo-terminal, `memprof run --live`) scrolling above it line by line in
//! a scroll region of the rows left, as it comes; `q` closes the view, Ctrl-C interrupts the
//! program as it would without the view. Nothing asks the terminal where its cursor is (the
//! answer would go to the program's standard output): the area is placed from the terminal's
//! size.
use crate::model::live::LiveState;
use crate::render::live;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::terminal;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How the view ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// `q`: the program runs on without it.
    Closed,
    /// The program finished (or its source stopped answering).
    Finished,
}

const REDRAW: Duration = Duration::from_secs(1);

/// Shows the view on `tty` (the real terminal) until `q` or `finished()`; `program_output`, the
/// master of the program's pseudo-terminal (non-blocking), is printed above the view. With it
/// (the program in this process) Ctrl-C interrupts the program; without (another process's
/// view), Ctrl-C closes the view as `q` does.
pub fn show(
    mut source: impl FnMut() -> Option<LiveState>,
    tty: File,
    mut program_output: Option<&mut File>,
    finished: impl Fn() -> bool,
) -> std::io::Result<Ended> {
    let here = program_output.is_some();
    let (cols, rows) = size_of(&tty);
    let height = live::HEIGHT.min(rows / 2).max(1);
    // The rows above the view: where the program's output scrolls.
    let top = rows - height;
    let mut tty = tty;
    // Room at the bottom (what was there scrolls up), then the scroll region above it.
    write!(
        tty,
        "{}\x1b[1;{top}r\x1b[{top};1H",
        "\n".repeat(height as usize)
    )?;
    tty.flush()?;
    terminal::enable_raw_mode()?;
    let result = (|| {
        let mut term = Terminal::with_options(
            CrosstermBackend::new(tty),
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, top, cols, height)),
            },
        )?;
        let mut state = LiveState::default();
        let mut pending: Vec<u8> = Vec::new();
        let mut next_draw = Instant::now();
        let note = if here {
            "q closes this view (the program runs on) · Ctrl-C interrupts the program"
        } else {
            "q closes this view (the program runs on)"
        };
        let ended = loop {
            if let Some(out) = program_output.as_deref_mut() {
                forward(out, &mut pending, &mut term, top)?;
            }
            let done = finished();
            if done || Instant::now() >= next_draw {
                if let Some(s) = source() {
                    state = s;
                }
                term.draw(|f| live::draw(f, f.area(), &state, note))?;
                next_draw = Instant::now() + REDRAW;
            }
            if done {
                break Ended::Finished;
            }
            if event::poll(Duration::from_millis(50))? {
                if let Event::Key(k) = event::read()? {
                    if k.kind == KeyEventKind::Release {
                        continue;
                    }
                    match k.code {
                        KeyCode::Char('q') | KeyCode::Char('Q') => break Ended::Closed,
                        // Raw mode turns Ctrl-C into a key: the program gets its SIGINT still.
                        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                            if !here {
                                break Ended::Closed;
                            }
                            // SAFETY: raise has no memory effects; the run handles SIGINT.
                            unsafe { libc::raise(libc::SIGINT) };
                        }
                        _ => {}
                    }
                }
            }
        };
        if let Some(out) = program_output {
            forward(out, &mut pending, &mut term, top)?;
        }
        // The whole terminal scrolling again, the view's rows cleared, the cursor below the
        // program's last line (written here: ratatui's clear would ask for the cursor).
        let tty = term.backend_mut();
        write!(tty, "\x1b[r\x1b[{};1H\x1b[J\x1b[?25h", top + 1)?;
        tty.flush()?;
        Ok(ended)
    })();
    let _ = terminal::disable_raw_mode();
    result
}

/// The terminal's columns and rows (80 x 24 where it does not say).
fn size_of(tty: &File) -> (u16, u16) {
    // SAFETY: TIOCGWINSZ fills the winsize given.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 && size.ws_row > 0 {
        (size.ws_col, size.ws_row)
    } else {
        (80, 24)
    }
}

/// Prints what the program wrote since, whole lines, at the bottom of the scroll region above
/// the view (each line scrolls the region up).
fn forward(
    out: &mut File,
    pending: &mut Vec<u8>,
    term: &mut Terminal<CrosstermBackend<File>>,
    top: u16,
) -> std::io::Result<()> {
    let mut buf = [0u8; 16384];
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            // WouldBlock: nothing more now; EIO: the program's side is closed.
            Err(_) => break,
        }
    }
    let Some(last_newline) = pending.iter().rposition(|&b| b == b'\n') else {
        return Ok(());
    };
    let text: Vec<u8> = pending.drain(..=last_newline).collect();
    let tty = term.backend_mut();
    write!(tty, "\x1b[{top};1H")?;
    for line in text
        .split(|&b| b == b'\n')
        .take(text.iter().filter(|&&b| b == b'\n').count())
    {
        // A line rewritten with `\r` (a progress bar) shows as it ended.
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let shown = line.rsplit(|&b| b == b'\r').next().unwrap_or(line);
        tty.write_all(b"\r\n")?;
        tty.write_all(shown)?;
    }
    tty.flush()
}
