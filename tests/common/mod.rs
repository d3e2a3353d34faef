//! Helpers for the integration tests: run the real memprof binary on real Python and torch.
//!
//! Environment:
//! - `MEMPROF_BIN`: the binary to test (default: the one cargo built);
//! - `MEMPROF_TEST_DEVICE`: `cpu` (default) or `cuda`; fixtures allocate there and every run
//!   passes `--device cpu` or `--device 0`, so the same expectations hold on both;
//! - `VIRTUAL_ENV`: the venv with torch (default: `.venv` in the repository);
//! - `MEMPROF_REPO`: the repository, where the test binary was built elsewhere.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const KIB: i64 = 1024;
pub const MIB: i64 = 1024 * 1024;

/// The repository (`MEMPROF_REPO` when the test binary runs on another machine).
pub fn root() -> PathBuf {
    std::env::var_os("MEMPROF_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

pub fn fixture(name: &str) -> String {
    root()
        .join("fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

pub fn on_cuda() -> bool {
    std::env::var("MEMPROF_TEST_DEVICE")
        .map(|d| d == "cuda")
        .unwrap_or(false)
}

pub fn device_flag() -> &'static str {
    if on_cuda() {
        "0"
    } else {
        "cpu"
    }
}

fn venv() -> PathBuf {
    std::env::var_os("VIRTUAL_ENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv"))
}

/// The venv's python (what `memprof` must behave like).
pub fn python() -> PathBuf {
    std::env::var_os("MEMPROF_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| venv().join("bin").join("python"))
}

/// The memprof binary under test (`MEMPROF_BIN`, else the one cargo built).
pub fn memprof_binary() -> PathBuf {
    std::env::var_os("MEMPROF_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_memprof")))
}

/// A memprof command with the venv active.
pub fn memprof() -> Command {
    in_the_venv(Command::new(memprof_binary()))
}

/// `cmd` as the tests run things: the venv active, no PYTHONPATH, the test device named, the
/// tests' own inductor cache, in fixtures/, no standard input.
pub fn in_the_venv(mut cmd: Command) -> Command {
    let venv = venv();
    cmd.env("VIRTUAL_ENV", &venv);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv.join("bin")];
    paths.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(paths).unwrap());
    cmd.env_remove("PYTHONPATH");
    cmd.env(
        "MEMPROF_TEST_DEVICE",
        if on_cuda() { "cuda" } else { "cpu" },
    );
    cmd.env("TORCHINDUCTOR_CACHE_DIR", inductor_cache());
    cmd.current_dir(root().join("fixtures"));
    cmd.stdin(Stdio::null());
    cmd
}

/// torch.compile's cache for the tests: this checkout's own, never the machine's (whose entries
/// may come from another checkout's compile of the same fixtures).
pub fn inductor_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("torchinductor")
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The program's own lines on standard error: memprof's (`memprof: ...`) taken out. Where
    /// the report takes standard output in a machine format, the program's output is here.
    pub fn program_stderr(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.starts_with("memprof: "))
            .collect()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }
}

pub fn finish(out: Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `memprof --device D run <args>`.
pub fn run(args: &[&str]) -> Run {
    let out = memprof()
        .args(["--device", device_flag(), "run"])
        .args(args)
        .output()
        .expect("memprof starts");
    finish(out)
}

/// Runs with `--format json -o FILE` (stats given) and returns the parsed report.
pub fn profile(stats: &[&str], args: &[&str]) -> (Run, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let out_text = out.to_string_lossy().into_owned();
    let mut all: Vec<&str> = Vec::new();
    for s in stats {
        all.push("--stat");
        all.push(s);
    }
    all.extend(["--format", "json", "-o", &out_text]);
    all.extend(args);
    let r = run(&all);
    let text = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr:\n{}", r.stderr));
    let v = serde_json::from_str(&text).expect("the report is JSON");
    (r, v)
}

/// The function named `qualname` in a report.
pub fn function<'a>(report: &'a Value, qualname: &str) -> &'a Value {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["qualname"] == qualname)
        .unwrap_or_else(|| panic!("{qualname} not in report: {report:#}"))
}

/// The line record whose source contains `needle`.
pub fn line<'a>(func: &'a Value, needle: &str) -> &'a Value {
    func["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["source"].as_str().unwrap().contains(needle))
        .unwrap_or_else(|| panic!("no line containing {needle:?} in {func:#}"))
}

pub fn stat(line: &Value, key: &str) -> i64 {
    line["stats"][key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} missing in {line:#}"))
}

pub fn delta(line: &Value) -> i64 {
    line["delta_bytes"]
        .as_i64()
        .unwrap_or_else(|| panic!("delta missing in {line:#}"))
}

/// The sum of a function's Δ over its lines.
pub fn delta_sum(func: &Value) -> i64 {
    func["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["delta_bytes"].as_i64())
        .sum()
}

/// The largest value of `key` over a function's lines that ran.
pub fn max_stat(func: &Value, key: &str) -> i64 {
    func["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["stats"][key].as_i64())
        .max()
        .unwrap()
}

pub fn hits(line: &Value) -> u64 {
    line["hits"].as_u64().unwrap()
}

/// The venv's python with memprof's package importable as the development set-up makes it
/// (scripts/dev_install.py), its native core the library this test build made.
pub fn python_with_memprof() -> Command {
    let native = std::env::var_os("MEMPROF_NATIVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let native = PathBuf::from(env!("CARGO_BIN_EXE_memprof-embedded"))
                .with_file_name("libmemprof.so");
            // `cargo test` builds the binaries, not the library's cdylib: a stale extension
            // would test old code.
            let built = std::fs::metadata(&native).and_then(|m| m.modified()).ok();
            let newest =
                newest_source(&root().join("src")).max(newest_source(&root().join("crates")));
            assert!(
                built.is_some() && built >= newest,
                "{} is missing or older than the sources: run `cargo build` before `cargo test` \
                 (scripts/test.sh does)",
                native.display()
            );
            native
        });
    let mut cmd = in_the_venv(Command::new(python()));
    cmd.env("MEMPROF_NATIVE", native);
    // The checkout's package (the development set-up's .pth does the same in .venv; the GPU
    // machine's venv has none).
    cmd.env("PYTHONPATH", root().join("src").join("wheel"));
    cmd
}

/// When the newest file under `dir` that the library is built from was modified (unit tests,
/// `tests.rs` and `tests/`, are compiled only into test builds: a change there leaves the
/// library as it was; `__pycache__` holds what python wrote).
fn newest_source(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        // Python's byte-code caches are written by any run of the package, not built from.
        if matches!(
            path.file_stem().and_then(|n| n.to_str()),
            Some("tests" | "__pycache__")
        ) {
            continue;
        }
        let modified = if path.is_dir() {
            newest_source(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(modified);
    }
    newest
}

/// pytest in `dir` (quiet, no cache folder), memprof's plugin loaded as the venv registers it.
pub fn pytest(dir: &Path, args: &[&str]) -> Run {
    finish(
        python_with_memprof()
            .current_dir(dir)
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-q"])
            // The GPU machine's venv has no entry point for the plugin (no development set-up).
            .args(if on_cuda() {
                &["-p", "memprof.pytest_plugin"][..]
            } else {
                &[]
            })
            .args(args)
            .output()
            .expect("pytest starts"),
    )
}

pub fn python_output(script: &Path, args: &[&str]) -> Run {
    let out = in_the_venv(Command::new(python()))
        .arg(script)
        .args(args)
        .output()
        .expect("python starts");
    finish(out)
}

/// Σ sites + the other sites + the unseen bytes: the peak, exactly.
pub fn assert_sums_to_the_peak(peak: &Value) {
    let listed: i64 = peak["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bytes"].as_i64().unwrap())
        .sum();
    let other = peak["other_sites"]["bytes"].as_i64().unwrap_or(0);
    let unseen = peak["unseen_bytes"].as_i64().unwrap();
    assert_eq!(
        listed + other + unseen,
        peak["allocated_bytes"].as_i64().unwrap(),
        "{peak}"
    );
    assert_eq!(unseen, 0, "memprof saw every allocation: {peak}");
}

/// Runs the fixture `args[0]` (with the rest of `args`) under plain python and under memprof with
/// each of `flag_sets`, and checks that the program prints the same under memprof (memprof's own
/// report follows it on stdout).
pub fn assert_prints_as_under_python(args: &[&str], flag_sets: &[&[&str]]) {
    let plain = python_output(&root().join("fixtures").join(args[0]), &args[1..]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    for flags in flag_sets {
        let mut all: Vec<&str> = flags.to_vec();
        all.extend(args);
        let r = run(&all);
        assert_eq!(r.code, 0, "{flags:?}: {}", r.stderr);
        assert!(
            r.stdout.starts_with(&plain.stdout),
            "{flags:?}:\n{}\nvs\n{}",
            r.stdout,
            plain.stdout
        );
    }
}

/// `torchrun --standalone --nproc-per-node N --no-python memprof --device cpu run <args>`, run in
/// `cwd`: a real multi-rank job (the fixtures use the gloo backend on the CPU).
pub fn torchrun(nproc: u32, cwd: &Path, args: &[&str]) -> Run {
    let mut full = torchrun_command(nproc, cwd);
    full.arg("--no-python")
        .arg(memprof_binary())
        .args(["--device", "cpu", "run"])
        .args(args);
    finish(full.output().expect("torchrun starts"))
}

/// `torchrun --standalone --nproc-per-node N script args...`: the same program without memprof,
/// in the same environment as [`torchrun`]'s.
pub fn torchrun_python(nproc: u32, cwd: &Path, args: &[&str]) -> Run {
    let mut full = torchrun_command(nproc, cwd);
    full.args(args);
    finish(full.output().expect("torchrun starts"))
}

fn torchrun_command(nproc: u32, cwd: &Path) -> Command {
    let mut full = torchrun_launcher(cwd);
    full.args(["--standalone", "--nproc-per-node", &nproc.to_string()]);
    full
}

/// `torchrun` in `cwd` with memprof()'s environment and the ranks on the CPU, its arguments to
/// be added (one node of several: `--nnodes 2 --rdzv-backend c10d ...`).
pub fn torchrun_launcher(cwd: &Path) -> Command {
    // memprof()'s environment (the venv, the device), lent to torchrun and so to every rank.
    let template = memprof();
    let mut full = Command::new(venv().join("bin").join("torchrun"));
    full.current_dir(cwd).stdin(Stdio::null());
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => full.env(k, v),
            None => full.env_remove(k),
        };
    }
    // The ranks run on the CPU (gloo) even on a GPU machine, and see no GPU: FSDP2 would build
    // its default mesh on CUDA. memprof measures the CPU.
    full.env("MEMPROF_TEST_DEVICE", "cpu")
        .env("CUDA_VISIBLE_DEVICES", "");
    full
}

/// A memprof command run as rank `rank` of `world` (the launcher's environment, one process).
pub fn as_rank(rank: u32, world: u32) -> Command {
    let mut cmd = memprof();
    cmd.env("RANK", rank.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string());
    cmd
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// memprof's standard output when it is a terminal `cols` columns wide (a real pseudo-terminal),
/// for `memprof ARGS`.
pub fn on_a_terminal(cols: u16, env: &[(&str, &str)], args: &[&str]) -> String {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 50,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two descriptors we then own.
    let made = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(made, 0, "openpty");
    // SAFETY: both descriptors are ours; each File closes its own.
    let (mut reader, writer) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let mut cmd = memprof();
    cmd.args(args)
        .env_remove("COLUMNS")
        .stdout(writer)
        .stderr(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    drop(cmd); // the parent's copy of the terminal's slave end
    let status = child.wait().unwrap();
    assert!(status.success());
    let mut out = Vec::new();
    // Reading past the output fails with EIO once the slave is closed: that is its end.
    let _ = reader.read_to_end(&mut out);
    String::from_utf8_lossy(&out).replace("\r\n", "\n")
}
