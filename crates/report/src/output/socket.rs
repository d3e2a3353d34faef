//! Where a running `memprof run` answers for its report: one Unix socket per process, named by
//! its PID, in a folder only this user can enter (`$XDG_RUNTIME_DIR/memprof/`, else
//! `/tmp/memprof-UID/`); and the asking side (`memprof snapshot PID`, `memprof live PID`). A
//! request is one line, `report FORMAT` (table, json, yaml, html) or `live`; the answer is the
//! report so far in that format, or the live view's numbers (JSON), or a line starting
//! `error: `. No signal is involved: the program's own handlers and its signals are untouched.
use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// How long the asking side waits for the report (the run builds it between its own steps).
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// The folder of the sockets, made (mode 0700) if need be; an error if another user owns it.
pub fn folder() -> Result<PathBuf> {
    // SAFETY: getuid has no failure mode.
    let uid = unsafe { libc::getuid() };
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(runtime) if runtime.is_dir() => runtime.join("memprof"),
        _ => std::env::temp_dir().join(format!("memprof-{uid}")),
    };
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&dir)?;
    }
    let meta = std::fs::metadata(&dir)?;
    if meta.uid() != uid {
        return Err(Error::usage(format!(
            "{} belongs to another user: memprof's sockets cannot live there",
            dir.display()
        ))
        .hint("set XDG_RUNTIME_DIR to a folder of your own"));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir)
}

/// The socket of the run whose process is `pid`.
pub fn path_of(pid: u32) -> Result<PathBuf> {
    Ok(folder()?.join(format!("{pid}.sock")))
}

/// The report of the running program `pid` in `format` (`table`, `json`, `yaml`, `html`).
pub fn ask(pid: u32, format: &str) -> Result<String> {
    request(pid, &format!("report {format}"))
}

/// The live numbers of the running program `pid` (`model::live::LiveState`, JSON).
pub fn ask_live(pid: u32) -> Result<String> {
    request(pid, "live")
}

/// `line` asked of the running program `pid`; its answer.
fn request(pid: u32, line: &str) -> Result<String> {
    let path = path_of(pid)?;
    let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
    let not_ours = |why: &str| {
        Error::usage(format!(
            "process {pid} is not a program memprof runs ({why})"
        ))
        .hint(
            "memprof snapshot reads programs started with `memprof run` (its PID, as ps or \
             nvidia-smi shows it)",
        )
    };
    if !alive {
        let _ = std::fs::remove_file(&path);
        return Err(Error::usage(format!("there is no process {pid}"))
            .hint("give the PID of a running `memprof run` (ps, nvidia-smi)"));
    }
    let mut stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(not_ours("it has no memprof socket"))
        }
        Err(_) => return Err(not_ours("its memprof socket does not answer")),
    };
    stream.set_read_timeout(Some(ANSWER_WITHIN))?;
    stream.write_all(format!("{line}\n").as_bytes())?;
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|e| {
        Error::usage(format!(
            "process {pid} did not answer within {} s ({e})",
            ANSWER_WITHIN.as_secs()
        ))
        .hint("its recorder may be busy: ask again")
    })?;
    if let Some(why) = answer.strip_prefix("error: ") {
        return Err(Error::usage(format!(
            "process {pid} could not give its report: {}",
            why.trim()
        )));
    }
    if answer.is_empty() {
        return Err(Error::usage(format!(
            "process {pid} closed the connection without a report (its run is ending)"
        )));
    }
    Ok(answer)
}
