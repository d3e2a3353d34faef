//! `memprof snapshot PID`: the report so far of a program `memprof run` runs, through its socket.
//! The program (fixtures/growing_steps.py, 30 steps keeping 128 KiB each) runs on unchanged:
//! its output and exit as without the snapshot; the snapshot has the run's peak so far, what
//! grows and the timeline, its outcome `running`; the socket goes when the run ends; a PID memprof
//! does not run, or none at all, gets one message and exit 2.
use crate::common::*;
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn snapshot(pid: u32, args: &[&str]) -> Run {
    finish(
        memprof()
            .arg("snapshot")
            .arg(pid.to_string())
            .args(args)
            .output()
            .unwrap(),
    )
}

#[test]
fn a_snapshot_of_a_running_program_and_the_program_runs_on_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let program = memprof()
        .args(["--device", device_flag(), "run", "-o"])
        .arg(dir.path().join("end.json"))
        .arg(fixture("growing_steps.py"))
        .args(["leak", "30", "--pace", "0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = program.id();
    // Asked until the run has ended four steps (the socket exists from the run's start).
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut report: Option<Value> = None;
    while Instant::now() < deadline {
        let r = snapshot(pid, &["--format", "json"]);
        if r.code == 0 {
            let v: Value = serde_json::from_str(&r.stdout).unwrap();
            if v["growth"]["steps"].as_u64().unwrap_or(0) >= 4 {
                report = Some(v);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let table = snapshot(pid, &[]);
    let out = finish(program.wait_with_output().unwrap());
    let report = report.expect("a snapshot with four steps");
    assert_eq!(report["metadata"]["outcome"]["status"], "running");
    assert!(report["peak"]["allocated_bytes"].as_i64().unwrap() > 0);
    assert!(report["timeline"]["allocations"].as_array().unwrap().len() > 1);
    let growing = &report["growth"]["sites"][0];
    assert_eq!(growing["bytes_per_step"], 131072, "{:#}", report["growth"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(table.stdout.contains("Peak: "), "{}", table.stdout);
    // The program as without the snapshots.
    assert_eq!(out.code, 0, "{}", out.stderr);
    let plain = python_output(
        std::path::Path::new(&fixture("growing_steps.py")),
        &["leak", "30"],
    );
    assert_eq!(out.stdout, plain.stdout);
    // The run has ended: its socket is gone, and the PID says so.
    let after = snapshot(pid, &[]);
    assert_eq!(after.code, 2, "{}", after.stdout);
}

#[test]
fn a_pid_memprof_does_not_run_is_refused_with_one_message() {
    let me = std::process::id();
    let r = snapshot(me, &[]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains(&format!(
            "process {me} is not a program memprof runs (it has no memprof socket)"
        )),
        "{}",
        r.stderr
    );
    let r = snapshot(4_000_000, &[]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("there is no process 4000000"),
        "{}",
        r.stderr
    );
}
