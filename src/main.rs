//! memprof: line-level memory profiler for PyTorch programs. This binary reads and renders
//! reports itself (`show`, `merge`, `diff`, `plot`, `stats`, `completions`, `--help`: it links
//! neither libtorch nor libpython, so they start at once) and hands `run` to `memprof-embedded`
//! beside it, which embeds CPython and links the script's libtorch; installed by the pip wheel
//! (no memprof-embedded, a Python beside it), to that Python's `python -m memprof`, which runs
//! the script in that interpreter with memprof's native core loaded.
mod version;

use memprof_report::commands;
use memprof_report::error::{exit_code, Error, Result};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

/// The binary that runs programs, installed beside this one (cargo install, the build).
const EMBEDDED: &str = "memprof-embedded";

fn main() {
    let code = match memprof(memprof_report::cli::argv::from_env()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.code
        }
    };
    std::process::exit(code);
}

fn memprof(args: Vec<String>) -> Result<i32> {
    // The wheel's `--version` is its Python's: `run` uses that interpreter, not one of ours.
    if memprof_report::cli::argv::asks_version(&args) {
        if let Ok(python @ Runner::Python(_)) = runner() {
            return hand_over(python);
        }
    }
    let cli = commands::parse(args, version::LONG);
    commands::dispatch(cli, |_, _| hand_over(runner()?))
}

/// What runs programs for this binary.
enum Runner {
    /// `memprof-embedded` beside it (cargo install, a build from source).
    Embedded(PathBuf),
    /// The pip wheel's install: the Python beside it (a venv's or conda's bin; `python` first, as a venv names it), as
    /// `python -m memprof`.
    Python(PathBuf),
}

fn runner() -> Result<Runner> {
    let me = std::env::current_exe()?;
    let embedded = me.with_file_name(EMBEDDED);
    if embedded.exists() {
        return Ok(Runner::Embedded(embedded));
    }
    // Not resolved: a venv's python is a link whose own path tells Python its venv.
    let python = ["python", "python3"]
        .iter()
        .map(|name| me.with_file_name(name))
        .find(|p| p.exists());
    python.map(Runner::Python).ok_or_else(|| Error {
        message: format!(
            "`memprof run` needs {EMBEDDED} or a Python beside {}",
            me.display()
        ),
        hint: Some(
            "build both binaries (`cargo build`, `cargo install --path .`); a pip install puts \
             memprof beside its venv's python (elsewhere, as with `pip install --user`, run \
             `python3 -m memprof run ...`)"
                .into(),
        ),
        code: exit_code::USAGE,
    })
}

/// Replaces this process with the runner, given this process's arguments as they came; returns
/// only when it cannot start.
fn hand_over(runner: Runner) -> Result<i32> {
    let (program, mut command) = match runner {
        Runner::Embedded(path) => (path.clone(), Command::new(path)),
        Runner::Python(path) => {
            let mut command = Command::new(&path);
            command.args(["-m", "memprof"]);
            (path, command)
        }
    };
    let e = command.args(std::env::args_os().skip(1)).exec();
    Err(Error {
        message: format!("cannot start {}: {e}", program.display()),
        hint: Some(
            "reinstall memprof (`cargo install --path .`, or `pip install --force-reinstall \
             memprof`)"
                .into(),
        ),
        code: exit_code::USAGE,
    })
}
