//! Ctrl-C: KeyboardInterrupt in the script, the report of what ran, then death by SIGINT as
//! python's (the shell's 130); a second Ctrl-C exits at once (130). (SIGTERM, which python does not turn into an exception: tests/first_hour.rs.)
use crate::common::*;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Starts `script` with `loop` targeted and waits until it prints "ready".
fn start(extra: &[&str], script: &std::path::Path) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = memprof();
    cmd.args(["--device", "cpu", "run", "-f", "loop"])
        .args(extra)
        .arg(script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A terminal's Ctrl-C reaches a program whose SIGINT is at its default action; the tests
    // may run as a background job, which inherits SIGINT ignored (and memprof, as python,
    // keeps an ignored SIGINT ignored: the conformance suite checks that).
    // SAFETY: signal() is async-signal-safe, as pre_exec's closure must be.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first, "ready\n");
    // Keep reading stdout in the background so the child never blocks on a full pipe.
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    std::mem::forget(rest);
    child
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: sends a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

#[test]
fn ctrl_c_raises_keyboard_interrupt_and_still_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let history = dir.path().join("h.pickle");
    let child = start(
        &[
            "--format",
            "json",
            "-o",
            report.to_str().unwrap(),
            "--history",
            history.to_str().unwrap(),
        ],
        "sleeper.py".as_ref(),
    );
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    // As python ends after an uncaught KeyboardInterrupt: by SIGINT at its default action.
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(libc::SIGINT),
        "{:?}",
        out.status
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("KeyboardInterrupt"), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["metadata"]["outcome"]["status"], "interrupted");
    assert_eq!(v["metadata"]["outcome"]["exit_code"], 130);
    let lp = function(&v, "loop");
    assert!(hits(line(lp, "keep.append")) >= 4);
    // KeyboardInterrupt left the loop from whichever line ran (time.sleep, nearly always).
    let raised: u64 = lp["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["raised"].as_u64())
        .sum();
    assert_eq!(raised, 1, "{lp:#}");
    // The allocation history up to the interrupt is written too: an alloc per append, and their
    // frees when the interrupt unwound `keep`.
    let appends = hits(line(lp, "keep.append"));
    assert_eq!(
        v["history"]["events"].as_u64(),
        Some(2 * appends),
        "{}",
        v["history"]
    );
    assert_eq!(&std::fs::read(&history).unwrap()[..1], b"\x80", "a pickle");
}

#[test]
fn a_second_ctrl_c_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    // The script ignores the first KeyboardInterrupt and keeps running.
    let script = dir.path().join("stubborn.py");
    std::fs::write(
        &script,
        "import time\ndef loop():\n    while True:\n        try:\n            time.sleep(0.01)\n        except KeyboardInterrupt:\n            pass\nprint('ready', flush=True)\nloop()\n",
    )
    .unwrap();
    let mut child = start(
        &["--format", "json", "-o", report.to_str().unwrap()],
        &script,
    );
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    signal(&child, libc::SIGINT);
    let status = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(hits(line(function(&v, "loop"), "time.sleep(0.01)")) > 0);
}
