//! `--history FILE`: a pickle that PyTorch's memory_viz tools load, whose allocation events add
//! up, line by line, to the Δ memprof reports for the same lines; written also when the program
//! raises; bounded by --history-max-entries; under --modules, each event's module call. (On
//! CUDA: scripts/history_check.py.)
use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// Loads the history with pickle and runs torch's memory_viz functions on it (trace_plot and
/// segment_plot build the viewer's page; trace and segsum walk every event and segment), then
/// sums the alloc and free events per (function, line) of memprof's frame.
const CHECK: &str = r#"
import json, pickle, sys
from torch.cuda import _memory_viz as mv
data = pickle.load(open(sys.argv[1], "rb"))
assert mv.trace_plot(data).startswith("\n<!DOCTYPE html>")
assert "<script" in mv.segment_plot(data)
text = mv.trace(data)
summary = mv.segsum(data)
sums, actions = {}, {}
for e in data["device_traces"][0]:
    actions[e["action"]] = actions.get(e["action"], 0) + 1
    frames = e.get("frames") or []
    key = frames[0]["name"] if frames and frames[0]["filename"] == "memprof" else "outside"
    if e["action"] == "alloc":
        sums[key] = sums.get(key, 0) + e["size"]
    elif e["action"] == "free_completed":
        sums[key] = sums.get(key, 0) - e["size"]
times = [e["time_us"] for e in data["device_traces"][0]]
print(json.dumps({"sums": sums, "actions": actions, "memprof": data["memprof"],
                  "times": [min(times), max(times), times == sorted(times)],
                  "live": sum(s["allocated_size"] for s in data["segments"]),
                  "trace_lines": len(text.splitlines())}))
"#;

fn check(history: &Path) -> Value {
    read(CHECK, history)
}

/// Runs `reader` (Python that loads the pickle named by its first argument and prints JSON) on
/// the history; what it printed.
fn read(reader: &str, history: &Path) -> Value {
    let r = finish(
        std::process::Command::new(python())
            .args(["-c", reader])
            .arg(history)
            .output()
            .unwrap(),
    );
    assert_eq!(
        r.code, 0,
        "the reader could not load the history:\n{}",
        r.stderr
    );
    serde_json::from_str(&r.stdout).unwrap()
}

#[test]
fn the_history_opens_in_memory_viz_and_its_events_add_up_to_each_lines_delta() {
    if on_cuda() {
        return; // CUDA's blocks share cached segments: scripts/history_check.py checks it
    }
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.pickle");
    let unix_us = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64
    };
    let before = unix_us();
    let (r, report) = profile(
        &["allocated_bytes.all.current"],
        &[
            "--history",
            history.to_str().unwrap(),
            "-f",
            "step",
            "lines.py",
        ],
    );
    let after = unix_us();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = check(&history);
    // Each event's time: µs since the epoch, within the run, in the order they happened.
    let times = &v["times"];
    assert!(
        times[0].as_i64().unwrap() >= before && times[1].as_i64().unwrap() <= after,
        "{times} not within {before}..{after}"
    );
    assert_eq!(times[2], true, "the events' times go back");
    let step = function(&report, "step");
    let mut checked = 0;
    for l in step["lines"].as_array().unwrap() {
        if l["hits"].as_u64().unwrap() == 0 {
            continue;
        }
        let key = format!("step line {}", l["line"]);
        let sum = v["sums"][&key].as_i64().unwrap_or(0);
        assert_eq!(
            sum,
            delta(l),
            "{key}: alloc - free in the history vs the report's Δ"
        );
        checked += 1;
    }
    assert_eq!(checked, 5);
    // Each storage: alloc and free inside a segment of its own.
    let a = &v["actions"];
    assert_eq!(a["alloc"], a["segment_alloc"]);
    assert_eq!(a["free_completed"], a["segment_free"]);
    assert_eq!(v["memprof"]["dropped"], 0);
    let info = &report["history"];
    assert_eq!(info["file"], history.to_str().unwrap());
    assert_eq!(info["events"], v["memprof"]["events"]);
    assert!(info["events"].as_u64().unwrap() >= 8, "{info}");
}

/// Each alloc event's size and frames, as (file's name, line, function).
const ALLOC_FRAMES: &str = r#"
import json, os, pickle, sys
data = pickle.load(open(sys.argv[1], "rb"))
print(json.dumps([[e["size"], [[os.path.basename(f["filename"]), f["line"], f["name"]]
                               for f in e["frames"]]]
                  for e in data["device_traces"][0] if e["action"] == "alloc"]))
"#;

#[test]
fn each_event_carries_the_whole_python_stack_the_same_under_the_binary_and_the_wheel() {
    if on_cuda() {
        return; // on CUDA: scripts/history_check.py checks the same, frame by frame
    }
    let dir = tempfile::tempdir().unwrap();
    let script = fixture("history_nested.py");
    let binary = dir.path().join("binary.pickle");
    let wheel = dir.path().join("wheel.pickle");
    let args = |history: &Path| {
        vec![
            "--history".to_string(),
            history.to_string_lossy().into_owned(),
            "-f".into(),
            "step".into(),
            script.clone(),
        ]
    };
    let r = run(&args(&binary).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The wheel's `memprof run`, in the venv's python: its launcher's and runpy's frames below
    // the script are the command's, not the program's.
    let r = finish(
        python_with_memprof()
            .args(["-m", "memprof", "--device", "cpu", "run"])
            .args(args(&wheel))
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    for history in [&binary, &wheel] {
        let allocs = read(ALLOC_FRAMES, history);
        let stack = |n: u64| {
            serde_json::json!([
                n,
                [
                    ["memprof", 22, "step line 22"],
                    ["history_nested.py", 13, "make"],
                    ["history_nested.py", 18, "forward"],
                    ["history_nested.py", 22, "step"],
                    ["history_nested.py", 28, "<module>"]
                ]
            ])
        };
        assert_eq!(
            allocs,
            serde_json::json!([stack(4096), stack(8192)]),
            "{}",
            history.display()
        );
    }
}

#[test]
fn a_stack_made_again_from_another_caller_line_names_that_line() {
    if on_cuda() {
        return; // the same native stacks on CUDA: scripts/history_check.py
    }
    // Each step makes its two tensors through the same two inner frames, at the same depth and
    // instruction, from two lines of `step`: a stack that differs from the one before it only
    // in an outer frame is that stack, in every step (memprof matches a thread's recent stacks
    // frame by frame rather than looking each up).
    let dir = tempfile::tempdir().unwrap();
    let script = fixture("history_recent.py");
    let binary = dir.path().join("binary.pickle");
    let wheel = dir.path().join("wheel.pickle");
    let r = run(&[
        "--history",
        &binary.to_string_lossy(),
        "-f",
        "step",
        &script,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = finish(
        python_with_memprof()
            .args(["-m", "memprof", "--device", "cpu", "run", "--history"])
            .arg(&wheel)
            .args(["-f", "step", &script])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let event = |size: u64, line: u64| {
        serde_json::json!([
            size,
            [
                ["memprof", line, format!("step line {line}")],
                ["history_recent.py", 8, "make"],
                ["history_recent.py", 12, "through"],
                ["history_recent.py", line, "step"],
                ["history_recent.py", 22, "<module>"]
            ]
        ])
    };
    let expected: Vec<Value> = (1..=3)
        .flat_map(|i| [event(1024 * i, 16), event(2048 * i, 17)])
        .collect();
    for history in [&binary, &wheel] {
        assert_eq!(
            read(ALLOC_FRAMES, history),
            Value::Array(expected.clone()),
            "{}",
            history.display()
        );
    }
}

#[test]
fn an_exception_still_writes_the_history_and_the_table_says_where_it_went() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("raised.pickle");
    let r = run(&[
        "--history",
        history.to_str().unwrap(),
        "-f",
        "fail",
        "raises.py",
    ]);
    assert_eq!(r.code, 1, "the script's exception: {}", r.stderr);
    assert!(r.stdout.contains("history: "), "{}", r.stdout);
    assert!(r.stdout.contains(history.to_str().unwrap()));
    let v = check(&history);
    if !on_cuda() {
        // fail()'s 4 KiB, allocated on its first line by each of its two calls (and freed
        // with the tracebacks, outside the targeted calls).
        assert_eq!(v["sums"]["fail line 9"], 2 * 4096, "{v}");
        assert_eq!(v["actions"]["alloc"], 2, "{v}");
    } else {
        // The first call initialised CUDA (memprof cannot attach to the allocator inside that:
        // it starts at the next event); the second call's allocation is recorded, with its line.
        assert!(v["actions"]["alloc"].as_u64().unwrap_or(0) >= 1, "{v}");
        assert_eq!(v["sums"]["fail line 9"], 4096, "{v}");
    }
}

#[test]
fn max_entries_keeps_the_latest_events_and_says_how_many_were_dropped() {
    if on_cuda() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("small.pickle");
    let (r, report) = profile(
        &[],
        &[
            "--history",
            history.to_str().unwrap(),
            "--history-max-entries",
            "3",
            "-f",
            "step",
            "lines.py",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let info = &report["history"];
    assert_eq!(info["events"], 3);
    assert!(info["dropped"].as_u64().unwrap() > 0, "{info}");
    check(&history);

    let r = run(&[
        "--history",
        "h.pickle",
        "--history-max-entries",
        "0",
        "lines.py",
    ]);
    assert_eq!(r.code, 2);
    assert!(r
        .stderr
        .contains("--history-max-entries must be at least 1"));
}

/// Calls 1-5 of `step`, each allocating two tensors of n x 4 KiB, and one more tensor after them.
const SCHEDULED: &str = r#"import torch
def step(n):
    a = torch.ones(n, 1024)
    b = a * 2
    return float(b.sum())
for n in range(1, 6):
    step(n)
tail = torch.ones(64, 1024)
"#;

#[test]
fn a_schedules_history_ends_with_its_last_measured_call() {
    if on_cuda() {
        return; // on CUDA: scripts/device/inprocess_history_check.py
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("scheduled.py");
    std::fs::write(&script, SCHEDULED).unwrap();
    let history = dir.path().join("h.pickle");
    let (r, report) = profile(
        &[],
        &[
            "--device",
            "cpu",
            "--history",
            history.to_str().unwrap(),
            "--warmup",
            "1",
            "--calls",
            "2",
            "-f",
            "step",
            script.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = check(&history);
    // The measured calls 2 and 3 only: two blocks of 8 KiB at lines 3 and 4, two of 12 KiB; the
    // recording stopped when call 3 ended, so calls 4 and 5 and the tail are not in it.
    let sums = &out["sums"];
    assert_eq!(sums["step line 3"], 2 * 4096 + 3 * 4096, "{out}");
    assert_eq!(sums["step line 4"], 2 * 4096 + 3 * 4096, "{out}");
    assert!(
        sums.as_object()
            .unwrap()
            .keys()
            .all(|k| k.starts_with("step line")),
        "only the measured calls' events: {out}"
    );
    assert_eq!(report["history"]["events"], out["memprof"]["events"]);
}

/// The labels of the alloc events: each event's user_metadata ("" for none).
const ALLOC_LABELS: &str = r#"
import json, pickle, sys
data = pickle.load(open(sys.argv[1], "rb"))
print(json.dumps([e.get("user_metadata", "") for e in data["device_traces"][0]
                  if e["action"] == "alloc"]))
"#;

#[test]
fn with_modules_the_events_name_the_module_call_and_phase() {
    if on_cuda() {
        return; // scripts/history_check.py checks the same on CUDA
    }
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("modules.pickle");
    let r = run(&[
        "--modules",
        "--history",
        history.to_str().unwrap(),
        "-f",
        "train_step",
        "mlp.py",
        "float32",
        "2",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let labels: Vec<String> = serde_json::from_value(read(ALLOC_LABELS, &history)).unwrap();
    // Each Linear's output in the forward, the backward's module call, and the step's own
    // lines outside any module call (the loss, Adam's state).
    for wanted in ["module 0 forward", "module 2 forward"] {
        assert!(labels.iter().any(|l| l == wanted), "{wanted}: {labels:?}");
    }
    assert!(
        labels
            .iter()
            .any(|l| l.starts_with("module ") && l.ends_with(" backward")),
        "{labels:?}"
    );
    assert!(
        labels
            .iter()
            .any(|l| l.starts_with("memprof: train_step line ")),
        "{labels:?}"
    );
}
