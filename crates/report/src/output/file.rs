//! Where a report's bytes land on disk: a regular file (or a new path) is replaced atomically; a
//! device or a FIFO is written in place; a symlink is followed to its target. And the check, made
//! before the script starts, that the path can be written at all.
use crate::error::{Error, Result};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The path the bytes go to: a symlink's final target (the link itself stays a link), else the
/// path itself. A dangling link resolves to the path it names, which is then created.
fn through_links(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    // As the kernel does, give up after 40 links (a loop then fails when written).
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&current) {
                Ok(target) => current = parent_of(&current).join(target),
                Err(_) => break,
            },
            _ => break,
        }
    }
    current
}

/// A device, FIFO or socket: replacing it with a regular file would break everything else on the
/// machine that uses it (`-o /dev/null` as root), so it is written where it is.
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket()
    })
}

/// A file memprof writes, as its messages name it: what it is and the option that named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// `-o`: a run's report, or what `merge`, `diff` and `fit` write.
    Report,
    /// `--plot`, and `memprof plot -o`.
    Plot {
        flag: &'static str,
    },
    Trace,
    History,
}

impl Written {
    fn what(self) -> &'static str {
        match self {
            Written::Report => "the report",
            Written::Plot { .. } => "the plot",
            Written::Trace => "the trace",
            Written::History => "the history",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Written::Report => "-o",
            Written::Plot { flag } => flag,
            Written::Trace => "--trace",
            Written::History => "--history",
        }
    }

    fn example(self) -> &'static str {
        match self {
            Written::Report => "report.json",
            Written::Plot { .. } => "memory.svg",
            Written::Trace => "trace.json",
            Written::History => "history.pickle",
        }
    }
}

fn cannot_write(path: &Path, what: Written, e: impl std::fmt::Display) -> Error {
    Error::usage(format!(
        "cannot write {} to '{}': {e}",
        what.what(),
        path.display()
    ))
}

/// Fails early, before a long run, if `what` could not be written to `path`: the directory must
/// exist and take a new file (tried for real: root passes every permission check, but not an
/// immutable or read-only directory), an existing file must open for writing. The messages name
/// the file and the option it came from.
pub fn check_writable(path: &Path, what: Written) -> Result<()> {
    let flag = what.flag();
    if path.is_dir() {
        return Err(
            Error::usage(format!("'{flag} {}' is a directory", path.display()))
                .hint(format!("pass a file name, e.g. {flag} {}", what.example())),
        );
    }
    let target = through_links(path);
    let dir = parent_of(&target);
    if !dir.is_dir() {
        return Err(Error::usage(format!(
            "cannot write {} to '{}': the directory '{}' does not exist",
            what.what(),
            path.display(),
            dir.display()
        ))
        .hint(format!(
            "create the directory first, or pass another {flag} path"
        )));
    }
    let hint = format!(
        "pass a path in a directory you can write, e.g. {flag} /tmp/{}",
        what.example()
    );
    if is_special(&target) {
        // A FIFO with no reader would block here: the write itself says what is wrong.
        return Ok(());
    }
    if target.exists() {
        // Opening without truncating leaves the old file as it was.
        OpenOptions::new()
            .append(true)
            .open(&target)
            .map_err(|e| cannot_write(path, what, e).hint(hint.clone()))?;
    }
    let probe = dir.join(format!(".memprof-probe.{}", std::process::id()));
    std::fs::File::create(&probe).map_err(|e| cannot_write(path, what, e).hint(hint))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `text` to `path`: atomically for a regular file (a reader never sees half a report),
/// in place for a device or FIFO, through a symlink to its target.
pub fn write_atomically(path: &Path, text: &str, what: Written) -> Result<()> {
    write_bytes_atomically(path, text.as_bytes(), what)
}

/// `write_atomically` for any bytes (pictures).
pub fn write_bytes_atomically(path: &Path, bytes: &[u8], what: Written) -> Result<()> {
    let target = through_links(path);
    if is_special(&target) {
        return OpenOptions::new()
            .write(true)
            .open(&target)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| cannot_write(path, what, e));
    }
    let dir = parent_of(&target);
    let name = target
        .file_name()
        .ok_or_else(|| Error::usage(format!("'{}' is not a file name", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &target)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        cannot_write(path, what, e)
    })
}
