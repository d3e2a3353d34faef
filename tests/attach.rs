//! `memprof attach PID`: what can be tested where CI's Pythons (3.11 to 3.13) have no
//! sys.remote_exec. A program of the venv's python is refused with its version and the fix
//! (`memprof run`), after that python itself was asked (it has no remote_exec); a process that
//! is not python, a `memprof run` program (read with snapshot or live), and a PID that does not
//! exist get one message each and exit 2; the program runs on untouched. The attach itself, on
//! a real Python 3.14, is scripts/attach-check.sh's (docs/long-runs.md).
use crate::common::*;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn attach(pid: u32, args: &[&str]) -> Run {
    finish(
        memprof()
            .arg("attach")
            .arg(pid.to_string())
            .args(args)
            .output()
            .unwrap(),
    )
}

/// A program that runs until killed, once it is under way (its first line read).
fn started(mut cmd: Command) -> Child {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = [0u8; 6];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert_eq!(&first, b"ready\n");
    child
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_python_without_remote_exec_is_refused_with_its_version_and_the_fix() {
    let mut cmd = in_the_venv(Command::new(python()));
    cmd.args([
        "-c",
        "import time, torch\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)",
    ]);
    let program = started(cmd);
    let version = String::from_utf8(
        Command::new(python())
            .args(["-c", "import sys; print(sys.version.split()[0])"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let r = attach(program.id(), &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "process {} runs Python {}: memprof attach needs Python 3.14 or later (sys.remote_exec, PEP 768)",
            program.id(),
            version.trim()
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("hint: start the program under memprof instead: memprof run script.py ARGS"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");
    // Untouched: it runs on.
    std::thread::sleep(Duration::from_millis(200));
    let mut program = program;
    assert!(program.try_wait().unwrap().is_none(), "the program runs on");
    stop(program);
}

#[test]
fn what_is_not_python_or_not_there_gets_one_message() {
    let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let r = attach(sleeper.id(), &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("process {} runs ", sleeper.id()))
            && r.stderr.contains("sleep, not python"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("start others with `memprof run`"),
        "{}",
        r.stderr
    );
    stop(sleeper);

    let r = attach(4_000_000, &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("memprof: error: there is no process 4000000"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn a_program_memprof_runs_is_read_with_snapshot_or_live() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("forever.py");
    std::fs::write(
        &script,
        "import time, torch\nprint('ready', flush=True)\nwhile True: time.sleep(0.05)\n",
    )
    .unwrap();
    let mut cmd = memprof();
    cmd.args(["--device", device_flag(), "run", "-o", "/dev/null"]);
    cmd.arg(&script);
    let program = started(cmd);
    let pid = program.id();
    let r = attach(pid, &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not python"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "it is memprof's: read it with `memprof snapshot {pid}` or `memprof live {pid}`"
        )),
        "{}",
        r.stderr
    );
    stop(program);
}
