//! The running program's report on request (`memprof snapshot PID`) and its live numbers
//! (`memprof live PID`): a thread that listens on the run's socket (`output::socket`) and
//! answers each request with the report so far, built
//! as `@memprof.profile()` under the command builds it (the recorder's lock, never the
//! allocator's; no signal, no GIL). Stopped, and its socket removed, when the run ends.
use crate::capture::interrupt::Ending;
use crate::cli::config::RunConfig;
use crate::output::socket;
use crate::render::{self, Format};
use crate::session;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The socket this process listens on, and whether the run still answers.
static SOCKET: Mutex<Option<PathBuf>> = Mutex::new(None);
static ANSWERING: AtomicBool = AtomicBool::new(false);
/// When the run began answering (the live view's clock).
static STARTED: Mutex<Option<std::time::Instant>> = Mutex::new(None);
/// The process that made the socket (a forked child inherits the statics, not the socket).
static OWNER: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Starts answering (a run that cannot make its socket runs on without it, saying nothing: the
/// socket is a convenience, not the report).
pub fn start(config: &RunConfig) {
    if let Ok(path) = socket::path_of(std::process::id()) {
        let _ = start_at(config, path);
    }
}

/// Starts answering on the socket `path` (`memprof attach` names it: the program's environment
/// may place the sockets' folder elsewhere than the command's).
pub fn start_at(config: &RunConfig, path: PathBuf) -> std::io::Result<()> {
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    *SOCKET.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
    *STARTED.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
    let _ = OWNER.set(std::process::id());
    ANSWERING.store(true, Ordering::SeqCst);
    let config = config.clone();
    // Signals blocked: the program's SIGINT must land on its own threads, where it interrupts
    // a blocking call (a `time.sleep`) as under python, never on this one.
    let _ = crate::capture::interrupt::with_signals_blocked(|| {
        std::thread::Builder::new()
            .name("memprof-answer".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    if !ANSWERING.load(Ordering::SeqCst) {
                        break;
                    }
                    answer(stream, &config);
                }
            })
    });
    Ok(())
}

/// Stops answering and removes the socket (the process that made it only: a forked child
/// shares the path and leaves it).
pub fn stop() {
    ANSWERING.store(false, Ordering::SeqCst);
    let path = SOCKET.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let (Some(path), Some(pid)) = (path, OWNER.get()) {
        if *pid == std::process::id() {
            // The listening thread waits in accept: one connection lets it see the end (an
            // attached session stops while its program runs on).
            let _ = UnixStream::connect(&path);
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn answer(stream: UnixStream, config: &RunConfig) {
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return;
    }
    if line.trim() == "live" {
        let started = *STARTED.lock().unwrap_or_else(|e| e.into_inner());
        let seconds = started.map_or(0.0, |t| t.elapsed().as_secs_f64());
        return match session::live::state(config, seconds) {
            Some(state) => reply(stream, &serde_json::to_string(&state).unwrap_or_default()),
            None => reply(stream, "error: no numbers yet\n"),
        };
    }
    let format = match line.trim().strip_prefix("report ") {
        Some("table") => Format::Table,
        Some("json") => Format::Json,
        Some("yaml") => Format::Yaml,
        Some("html") => Format::Html,
        _ => return reply(stream, "error: unknown request\n"),
    };
    let ending = Ending {
        status: "running",
        exit_code: 0,
        warning: "a snapshot of a run still going: what it measured so far".into(),
    };
    match session::report_while_running(&ending, config) {
        Some(profile) if ANSWERING.load(Ordering::SeqCst) => {
            reply(stream, &render::render(&profile, format))
        }
        Some(_) => reply(stream, "error: the run is ending\n"),
        None => reply(
            stream,
            "error: no report yet (the run has not begun measuring, or its recorder stayed busy)\n",
        ),
    }
}

fn reply(mut stream: UnixStream, text: &str) {
    let _ = stream.write_all(text.as_bytes());
}
