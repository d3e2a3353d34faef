//! The program's child processes, as memprof follows them: the folder their reports go to,
//! whether this process is a child of the run (a forked copy of it: a DataLoader worker), and
//! what a forked child does when it leaves. Spawned children (fresh interpreters) load the
//! native core themselves and write to the same folder (src/python/py/children.py).
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Following children: where their reports go, and which process ran the program.
struct Follow {
    dir: PathBuf,
    main_pid: u32,
}

static FOLLOW: OnceLock<Follow> = OnceLock::new();

/// What writes a forked child's report when it leaves through `os._exit(status)`: the session's
/// (registered by `memprof run`, which knows the run's configuration).
pub type ChildReport = Box<dyn Fn(i32) + Send + Sync>;

static CHILD_REPORT: OnceLock<ChildReport> = OnceLock::new();

/// Follows the children of this process from now on: their reports go to a fresh folder in
/// the temporary directory. Returns the folder.
pub fn arm() -> std::io::Result<&'static Path> {
    let main_pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("memprof-children-{main_pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let follow = FOLLOW.get_or_init(|| Follow { dir, main_pid });
    Ok(&follow.dir)
}

/// The folder the children's reports go to, when following.
pub fn dir() -> Option<&'static Path> {
    FOLLOW.get().map(|f| f.dir.as_path())
}

/// The process that ran the program, when following.
pub fn main_pid() -> Option<u32> {
    FOLLOW.get().map(|f| f.main_pid)
}

/// Whether this process is a forked copy of the one that ran the program.
pub fn is_child() -> bool {
    main_pid().is_some_and(|pid| pid != std::process::id())
}

/// Where this child writes its report.
pub fn report_path() -> Option<PathBuf> {
    dir().map(|d| d.join(format!("child-{}.json", std::process::id())))
}

/// Registers what writes a forked child's report.
pub fn set_child_report(f: ChildReport) {
    let _ = CHILD_REPORT.set(f);
}

/// A forked child leaves through `os._exit(status)`: its report first.
pub fn child_exits(status: i32) {
    if is_child() {
        if let Some(report) = CHILD_REPORT.get() {
            report(status);
        }
    }
}

/// This process was just forked from the run: what it measures from now on is its own.
pub fn forked() {
    super::recorder::with(|r| r.forked());
    super::peak::forked();
    super::interrupt::forked();
}

/// The parent is done with the children's reports: the folder goes.
pub fn clean_up() {
    if let (Some(dir), false) = (dir(), is_child()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}
